"""Validates serve/deploy/servingruntime.yaml against the ServingRuntime CRD's published
OpenAPI v3 schema (serve/deploy/schema/), as a strict API server would: the schema's types,
required fields and enums (jsonschema), and no field the schema does not declare (the API
server would prune it silently; here it is an error). Exits non-zero on any violation."""

import pathlib
import sys

import jsonschema
import yaml

HERE = pathlib.Path(__file__).parent


def version_schema(crd, api_version):
    group = crd["spec"]["group"]
    for version in crd["spec"]["versions"]:
        if f"{group}/{version['name']}" == api_version:
            return version["schema"]["openAPIV3Schema"]
    raise SystemExit(f"the CRD has no version {api_version}")


def undeclared(value, schema, path):
    """Fields of `value` that `schema` does not declare, as paths."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if properties is not None and key in properties:
                found += undeclared(item, properties[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                found += undeclared(item, extra, f"{path}.{key}")
            elif properties is not None:
                found.append(f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += undeclared(item, schema["items"], f"{path}[{i}]")
    return found


def violations(crd, manifest):
    """Every way `manifest` breaks the CRD's schema."""
    if manifest.get("kind") != crd["spec"]["names"]["kind"]:
        return [f"kind: not a {crd['spec']['names']['kind']}"]
    schema = version_schema(crd, manifest["apiVersion"])
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft4Validator(schema).iter_errors(manifest)
    ]
    return errors + [f"{path}: not declared by the schema" for path in undeclared(manifest, schema, "")]


def broken_copies(manifest):
    """Copies of `manifest` each broken one way the validation must catch."""
    import copy

    def broken(change):
        bad = copy.deepcopy(manifest)
        change(bad)
        return bad

    container = lambda m: m["spec"]["containers"][0]
    return {
        "a port as a string": broken(lambda m: container(m)["ports"][0].update(containerPort="8080")),
        "a misspelt field": broken(lambda m: m["spec"].update(supportedModelFormat=[])),
        "no containers": broken(lambda m: m["spec"].pop("containers")),
        "args not a list": broken(lambda m: container(m).update(args="--load")),
    }


def main():
    crd = yaml.safe_load((HERE / "schema" / "serving.kserve.io_servingruntimes.yaml").read_text())
    manifest = yaml.safe_load((HERE / "servingruntime.yaml").read_text())
    # The validation has teeth: each broken copy is refused.
    for what, bad in broken_copies(manifest).items():
        if not violations(crd, bad):
            raise SystemExit(f"the validation accepts a manifest with {what}")
    errors = violations(crd, manifest)
    for error in errors:
        print(f"servingruntime.yaml {error}", file=sys.stderr)
    if errors:
        raise SystemExit(1)
    print(f"servingruntime.yaml is a valid {manifest['apiVersion']} {manifest['kind']}")


if __name__ == "__main__":
    main()
