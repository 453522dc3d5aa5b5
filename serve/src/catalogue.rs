//! [`Catalogue`]: which model files the server knows and their architectures, and
//! [`CatalogueLoader`], the loader that serves them over one cache group.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use resident::burn::{BurnError, Cpu, Served, SharedLoader, SharedWeights, TensorSpec};
use resident::cache::CacheGroup;
use resident::runtime::Arc;
use resident::{BoxError, Deadline, Loader, Model, ModelId};

use crate::model::ServeModel;
use crate::zoo::Zoo;

/// The manifest [`Catalogue::from_manifest`] reads in the models directory: the fixtures'
/// `expected.json`, whose `models` entries name each file's architecture (`id`, `kind`,
/// `sizes`) beside its stored input and output.
pub const MANIFEST: &str = "expected.json";

/// The device the catalogue's models are served on (ndarray: the one CPU device).
pub const DEVICE: &str = "cpu";

/// The cache group every model of the catalogue shares: one weight store, one RAM budget.
pub type Group = CacheGroup<SharedWeights<Zoo, Cpu>>;

/// The model files the server can load: `<dir>/<id>.safetensors`, each with its architecture.
#[derive(Debug, Clone)]
pub struct Catalogue {
    dir: PathBuf,
    entries: BTreeMap<String, Zoo>,
}

/// A catalogue that could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogueError {
    /// The manifest could not be read.
    #[error("cannot read the catalogue manifest {}: {source}", path.display())]
    Read {
        /// The manifest.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The manifest is not the expected JSON.
    #[error("the catalogue manifest {} is not valid: {source}", path.display())]
    Parse {
        /// The manifest.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// An entry names an architecture the server does not know.
    #[error("catalogue entry `{id}` has the unknown kind `{kind}`")]
    UnknownKind {
        /// The entry's id.
        id: String,
        /// Its kind.
        kind: String,
    },
    /// An entry's id cannot name a file of the models directory (it must be a valid
    /// [`ModelId`] without `/`).
    #[error("catalogue entry `{id}` cannot name a model file")]
    BadId {
        /// The entry's id.
        id: String,
    },
}

/// A load of an id the catalogue does not list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model `{id}` is not in the catalogue")]
pub struct NotInCatalogue {
    /// The canonical id.
    pub id: String,
}

#[derive(serde::Deserialize)]
struct Manifest {
    models: Vec<ManifestEntry>,
}

#[derive(serde::Deserialize)]
struct ManifestEntry {
    id: String,
    kind: String,
    sizes: [usize; 3],
}

impl Catalogue {
    /// The files of `dir` with the architectures `entries` give them. Every id must be a valid
    /// [`ModelId`] without `/` (a file of `dir` itself).
    pub fn new(dir: &Path, entries: impl IntoIterator<Item = (String, Zoo)>) -> Result<Self, CatalogueError> {
        let entries: BTreeMap<String, Zoo> = entries.into_iter().collect();
        if let Some(id) = entries.keys().find(|id| ModelId::validate(id).is_err() || id.contains('/')) {
            return Err(CatalogueError::BadId { id: id.clone() });
        }
        Ok(Self { dir: dir.to_owned(), entries })
    }

    /// The catalogue [`MANIFEST`] in `dir` describes.
    pub fn from_manifest(dir: &Path) -> Result<Self, CatalogueError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .map_err(|source| CatalogueError::Read { path: path.clone(), source })?;
        let manifest: Manifest = serde_json::from_str(&text)
            .map_err(|source| CatalogueError::Parse { path: path.clone(), source })?;
        let entries = manifest
            .models
            .into_iter()
            .map(|e| match Zoo::from_kind(&e.kind, e.sizes) {
                Some(arch) => Ok((e.id, arch)),
                None => Err(CatalogueError::UnknownKind { id: e.id, kind: e.kind }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(dir, entries)
    }

    /// The models directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The architecture of the model `id`, if the catalogue lists it.
    pub fn get(&self, id: &str) -> Option<Zoo> {
        self.entries.get(id).copied()
    }

    /// Whether the catalogue lists `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    /// The listed ids, in order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }
}

/// Loads the catalogue's models: one [`SharedLoader`] per distinct architecture, each with its
/// own cache on [`DEVICE`], all in one [`Group`]. A canonical id the catalogue does not list is
/// refused with [`NotInCatalogue`].
pub struct CatalogueLoader {
    catalogue: Arc<Catalogue>,
    loaders: Vec<(Zoo, SharedLoader<Zoo, Cpu>)>,
}

impl CatalogueLoader {
    /// A loader for every architecture of `catalogue`, over `group`.
    pub fn new(catalogue: Arc<Catalogue>, group: &Arc<Group>) -> Result<Self, BurnError> {
        let mut loaders: Vec<(Zoo, SharedLoader<Zoo, Cpu>)> = Vec::new();
        for arch in catalogue.entries.values() {
            if !loaders.iter().any(|(known, _)| known == arch) {
                let loader = SharedLoader::new(Arc::new(*arch), catalogue.dir(), group, DEVICE)?;
                loaders.push((*arch, loader));
            }
        }
        Ok(Self { catalogue, loaders })
    }

    /// The catalogue it loads from.
    pub fn catalogue(&self) -> &Arc<Catalogue> {
        &self.catalogue
    }

    /// The loader of `id`'s architecture.
    fn loader(&self, id: &ModelId) -> Result<&SharedLoader<Zoo, Cpu>, NotInCatalogue> {
        let arch = self.catalogue.get(id).ok_or_else(|| NotInCatalogue { id: id.to_string() })?;
        // Every architecture of the catalogue got a loader in `new`.
        self.loaders
            .iter()
            .find(|(known, _)| *known == arch)
            .map(|(_, loader)| loader)
            .ok_or_else(|| NotInCatalogue { id: id.to_string() })
    }
}

/// A catalogue model as the server serves it: the burn model, and the catalogue id it was
/// loaded from (an alias's source).
pub struct CatalogueModel {
    source: ModelId,
    served: Served<Zoo, Cpu>,
}

impl CatalogueModel {
    /// The burn model.
    pub fn served(&self) -> &Served<Zoo, Cpu> {
        &self.served
    }
}

impl Model for CatalogueModel {
    fn size_bytes(&self) -> u64 {
        self.served.size_bytes()
    }

    fn unload(&self) -> Result<(), BoxError> {
        self.served.unload()
    }
}

impl ServeModel for CatalogueModel {
    fn infer(&self, input: &[f32]) -> Result<Vec<f32>, BurnError> {
        self.served.infer(input)
    }

    fn inputs(&self) -> Vec<TensorSpec> {
        ServeModel::inputs(&self.served)
    }

    fn outputs(&self) -> Vec<TensorSpec> {
        ServeModel::outputs(&self.served)
    }

    fn source(&self) -> Option<&str> {
        Some(&self.source)
    }
}

impl fmt::Debug for CatalogueModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogueModel").field("source", &self.source).finish_non_exhaustive()
    }
}

impl Loader for CatalogueLoader {
    type Model = CatalogueModel;

    fn load(&self, id: &ModelId) -> Result<Self::Model, BoxError> {
        self.load_until(id, Deadline::NONE)
    }

    fn load_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        let served = self.loader(id)?.load_until(id, deadline)?;
        Ok(CatalogueModel { source: id.clone(), served })
    }

    /// A replace (`PUT` of a served id) reads the model's file again.
    fn reload_until(&self, id: &ModelId, deadline: Deadline) -> Result<Self::Model, BoxError> {
        let served = self.loader(id)?.reload_until(id, deadline)?;
        Ok(CatalogueModel { source: id.clone(), served })
    }

    fn declared_bytes(&self, id: &ModelId) -> Result<Option<u64>, BoxError> {
        self.loader(id)?.declared_bytes(id)
    }
}

impl fmt::Debug for CatalogueLoader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogueLoader")
            .field("dir", &self.catalogue.dir())
            .field("architectures", &self.loaders.len())
            .finish()
    }
}
