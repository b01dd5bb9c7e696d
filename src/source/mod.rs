//! Where landing bytes come from: the batch folders listed ([`discover`]) and their files
//! read and decoded ([`read`], [`codec`]), and cut into records ([`records`]).

pub mod codec;
pub mod discover;
pub(crate) mod prefetch;
pub mod read;
pub mod records;
