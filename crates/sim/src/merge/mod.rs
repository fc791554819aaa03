//! How writes combine with stored objects: patches, server-side apply and managed fields.

pub mod fieldset;
pub mod managed;
pub mod patch;
