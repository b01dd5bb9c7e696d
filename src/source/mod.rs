//! Where landing bytes come from: the batch folders listed ([`discover`]) and their files
//! read and decoded ([`read`]).

pub mod discover;
pub(crate) mod prefetch;
pub mod read;
