"""Drives a running resident-serve with NVIDIA's `tritonclient.http`, unmodified: health,
server and model metadata, readiness, the model repository (index, load, unload), inference
with numpy inputs sent in binary and in JSON (checked against fixtures/models/expected.json),
and the protocol's refusals.

    python serve/tests/tritonclient_check.py HOST:PORT MODELS_DIR

`.ci/run` installs the client into a virtual environment of its own and runs this against the
server it starts; any failure exits non-zero.
"""

import json
import sys
import time

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def wait_live(client, seconds=60):
    """The server was just started: wait (bounded) until it answers."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if client.is_server_live():
                return
        except Exception:  # not listening yet
            pass
        if time.monotonic() > deadline:
            sys.exit(f"the server did not come up within {seconds} s")
        time.sleep(0.2)


def refused(call, status):
    try:
        call()
    except InferenceServerException as error:
        assert error.status() == str(status), (error.status(), error.message())
        return
    raise AssertionError(f"expected a {status} refusal")


def main():
    url, models_dir = sys.argv[1], sys.argv[2]
    client = httpclient.InferenceServerClient(url=url)
    wait_live(client)
    assert client.is_server_ready()
    server = client.get_server_metadata()
    assert server["name"] == "resident-serve", server
    assert "binary_tensor_data" in server["extensions"], server
    with open(f"{models_dir}/expected.json") as file:
        fixtures = {m["id"]: m for m in json.load(file)["models"]}
    index = {m["name"]: m["state"] for m in client.get_model_repository_index()}
    assert index == {"cnn": "UNAVAILABLE", "mlp": "UNAVAILABLE"}, index
    for name in ("mlp", "cnn"):
        assert not client.is_model_ready(name)
        client.load_model(name)
        assert client.is_model_ready(name) and client.is_model_ready(name, model_version="1")
        meta = client.get_model_metadata(name)
        assert meta["name"] == name and meta["versions"] == ["1"], meta
        (tensor,) = meta["inputs"]
        assert (tensor["name"], tensor["datatype"], tensor["shape"][0]) == ("input", "FP32", -1), meta
        # The declared shape, the batch's size left to numpy: [-1, 16] rows, [-1, 1, 8, 8] images.
        x = np.array(fixtures[name]["input"], dtype=np.float32).reshape([-1] + tensor["shape"][1:])
        want = np.array(fixtures[name]["output"], dtype=np.float32)
        for binary in (True, False):
            inputs = [httpclient.InferInput("input", list(x.shape), "FP32")]
            inputs[0].set_data_from_numpy(x, binary_data=binary)
            outputs = [httpclient.InferRequestedOutput("output", binary_data=binary)]
            result = client.infer(name, inputs, outputs=outputs, request_id="r-1")
            got = result.as_numpy("output")
            assert got.shape[0] == x.shape[0], got.shape
            assert np.allclose(got.flatten(), want, rtol=1e-5, atol=1e-5), (name, binary, got, want)
            assert result.get_response()["id"] == "r-1"
        print(f"{name}: metadata, readiness, binary and JSON inference agree with the fixtures")
    wrong = [httpclient.InferInput("x", [1, 16], "FP32")]
    wrong[0].set_data_from_numpy(np.zeros((1, 16), dtype=np.float32))
    refused(lambda: client.infer("mlp", wrong), 400)
    refused(lambda: client.infer("mlp", wrong, model_version="2"), 404)
    refused(lambda: client.get_model_metadata("nope"), 404)
    print("refusals: a bad input name 400, another version 404, an unknown model 404")
    client.load_model("detector", config=json.dumps({"source": "cnn"}))
    assert client.is_model_ready("detector")
    client.unload_model("detector")
    assert not client.is_model_ready("detector")
    index = {m["name"]: m["state"] for m in client.get_model_repository_index()}
    assert index == {"cnn": "READY", "mlp": "READY"}, index
    refused(lambda: client.load_model("nope"), 404)
    print("repository: index, load (an alias through its config), unload")


if __name__ == "__main__":
    main()
