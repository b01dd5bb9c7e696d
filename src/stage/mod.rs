//! Stage: data files → one Arrow staging table, grouped by topic.
//!
//! Every non-blank line is parsed exactly once, by [`crate::json`]'s strict reader with
//! only the top level materialised (no per-row value tree). A line that is a JSON object
//! with a usable topic (and id, when an id field is configured) becomes a staged message; anything else becomes a [`CorruptLine`] with the
//! parser's reason and the exact bytes. Duplicates by message id are dropped, first
//! occurrence (file order, then line) wins.
//!
//! The payload and metadata are kept as the exact JSON text the source sent (found with a
//! top-level structural scan of the validated line), so staging is lossless: numbers keep
//! their literal text and nothing is re-encoded. Flattening parses only the payload.
//!
//! This stage does no Delta I/O; it only reads the landing files.
//!
//! Its steps, a file each: `text.rs` cuts a file's text into records and stages each,
//! `parse.rs` reads one record's envelope into a message of spans (`staged.rs`),
//! `ids.rs` dedups message ids and keys across a batch, and `assemble.rs` builds each
//! topic's record batches (their columns in `columns.rs`) from the staged files.
//! `pieces.rs` stages a file larger than a chunk piece by piece; `spill.rs` persists a
//! staging table too large for memory.

mod assemble;
mod columns;
mod ids;
mod parse;
mod pieces;
pub(crate) mod spill;
mod staged;
mod text;
#[cfg(test)]
mod tests;

use rayon::prelude::*;

use crate::config::EnvelopeConfig;
use crate::error::Result;
use crate::source::discover::SourceFile;
use crate::source::read::Decoded;

pub(crate) use self::assemble::assemble;
pub use self::assemble::{FileStats, Staging, staging_schema};
pub use self::ids::IdSet;
use self::parse::Scratch;
pub use self::pieces::Pieces;
pub use self::staged::{CorruptLine, StagedFile};
/// The parts of a [`StagedFile`], named by benches and fuzz targets.
#[cfg(feature = "testing")]
pub use self::staged::{At, Message, Span};
use self::text::stage_bytes;

/// How staging threads take a chunk's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOrder {
    /// Each thread a range of the files.
    Ranges,
    /// One by one in file order: the order they arrive in from a fetch that hands them
    /// over as they come.
    Arrival,
}

/// Stages every file on the current rayon pool; a file that cannot be read fails the
/// whole stage (loading part of a batch would replace its rows with fewer).
#[cfg(any(test, feature = "testing"))]
pub fn stage(files: &[SourceFile], envelope: &EnvelopeConfig) -> Result<Staging> {
    stage_with_progress(
        files,
        envelope,
        &|| {},
        FileOrder::Ranges,
        &mut IdSet::default(),
        &crate::source::read::read_file,
    )
}

/// Reads one data file's text (decoded).
pub type FileReader<'a> = dyn Fn(&SourceFile) -> Result<Decoded> + Sync + 'a;

/// [`stage`], calling `on_file` after each file (from worker threads), the threads
/// taking the files in `order`. `seen` holds the message ids of earlier chunks of the
/// same batch, so dedup spans chunks.
pub fn stage_with_progress(
    files: &[SourceFile],
    envelope: &EnvelopeConfig,
    on_file: &(dyn Fn() + Sync),
    order: FileOrder,
    seen: &mut IdSet,
    reader: &FileReader<'_>,
) -> Result<Staging> {
    let stage_one = |scratch: &mut Scratch, file: &SourceFile| -> Result<StagedFile> {
        let decoded = reader(file)?;
        let staged = stage_bytes(decoded, file, envelope, scratch);
        on_file();
        Ok(staged)
    };
    let staged: Vec<Result<StagedFile>> = match order {
        // Every thread takes the next file in order, not a range of its own; the results
        // are put back in file order.
        FileOrder::Arrival => {
        let mut numbered: Vec<(usize, Result<StagedFile>)> = files
            .iter()
            .enumerate()
            .par_bridge()
            .map_init(Scratch::new, |scratch, (i, file)| (i, stage_one(scratch, file)))
            .collect();
        numbered.sort_unstable_by_key(|(i, _)| *i);
        numbered.into_iter().map(|(_, staged)| staged).collect()
        }
        FileOrder::Ranges => files
            .par_iter()
            .map_init(Scratch::new, |scratch, file| stage_one(scratch, file))
            .collect(),
    };
    let staged = staged.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(assemble(files, staged, dedup_by_id(envelope), seen))
}

/// Whether messages are deduplicated by their id (an id field and no dedup fields).
fn dedup_by_id(envelope: &EnvelopeConfig) -> bool {
    envelope.id_field.is_some() && envelope.dedup_fields.is_none()
}

/// Stages one file's bytes (pure; used by tests and benches).
#[cfg(any(test, feature = "testing"))]
pub fn stage_file_bytes(bytes: &[u8], source_file: &str, envelope: &EnvelopeConfig) -> StagedFile {
    let file = SourceFile {
        path: source_file.into(),
        name: source_file.to_string(),
        bytes: bytes.len() as u64,
        compression: crate::source::codec::Compression::None,
        folder: 0,
        modified: None,
        etag: None,
    };
    stage_bytes(Decoded::plain(bytes.to_vec()), &file, envelope, &mut Scratch::new())
}
