//! The pure planning core of eto.
//!
//! Everything here is a synchronous function of its inputs: no API client, no async runtime,
//! no clock (time is passed in). The controller observes the cluster, asks this crate what
//! should exist, and applies the answer.
//!
//! Start with [`validation::validate`], which turns a TrainingJob into an
//! [`EffectiveSpec`] with every default applied, or lists what is wrong with it.

pub mod effective_spec;
pub mod names;
pub mod parse;
pub mod validation;

#[cfg(test)]
mod testing;

pub use effective_spec::EffectiveSpec;
pub use validation::{FieldError, InvalidSpec, validate};
