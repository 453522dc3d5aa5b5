//! The burn models' integration tests, in one binary (the ndarray backend is monomorphised
//! once for them).

mod burn_models;
mod changing_files;
mod doc_example;
