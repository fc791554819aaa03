//! eto-sim's API server checked from outside, through `kube::Client` and kubectl: it behaves
//! like kube-apiserver where a client can tell (`conformance`), accepts built-in objects in
//! protobuf as client-go sends them (`protobuf`), and serves kubectl's typed commands
//! (`kubectl_create`). One binary, so that eto-sim and kube are linked once.

// Test code: a panic is a test failure with its message.
#![allow(clippy::unwrap_used)]

mod conformance;
mod kubectl_create;
mod pod_validation;
mod protobuf;
mod support;
