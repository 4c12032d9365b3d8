//! Cross-crate integration tests live in `tests/tests/`. This library holds nothing but the
//! README's example, compiled and run as a doctest so the README cannot drift from the API.

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
