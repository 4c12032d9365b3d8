//! Settlement (SPEC §6): the attempt guard that carries the settlement state, and the
//! background settler it hands async work to.

pub(crate) mod guard;
pub(crate) mod settler;
