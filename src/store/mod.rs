//! Object stores as bronze uses them: where a catalog or landing zone lives
//! ([`location`]), and the wrappers every store is seen through — request counts and
//! latency ([`metered`]), retries of transient failures ([`retries`]), the one-writer
//! mode of stores without put-if-absent ([`single_writer`]), and local tables' log
//! listings by name ([`local`]).

pub(crate) mod local;
pub(crate) mod location;
pub(crate) mod metered;
pub(crate) mod retries;
pub(crate) mod single_writer;
