//! kube-apiserver's validation of built-in objects, as far as eto-sim reproduces it: the
//! string formats of names, keys and values ([`syntax`]), field errors in kube-apiserver's
//! words ([`field`]), every object's labels and annotations ([`metadata`]), and the rules of a
//! new pod ([`pod`]).

pub mod field;
pub mod metadata;
pub mod pod;
pub mod syntax;
