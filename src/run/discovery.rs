//! The discover step of a run: the batch key and data files of its folders, local or
//! in an object store, validated before any I/O.

use std::path::Path;

use super::Progress;
use super::context::Context;
use crate::error::{Error, Result};
use crate::source::discover;
use crate::store::location::Location;

/// Discovers the batch folders (see [`discover::discover_folders`]) and says so.
pub(super) fn discover(
    ctx: &Context,
    batch_dirs: &[impl AsRef<Path>],
) -> Result<discover::Discovery> {
    let found = list_folders(ctx, batch_dirs)?;
    tracing::info!(batch = %found.key, files = found.files.len(), skipped = found.skipped.len(), "discovered");
    ctx.report_progress(Progress::Discovered {
        files: found.files.len(),
        bytes: found.files.iter().map(|f| f.bytes).sum(),
    });
    Ok(found)
}

/// The batch key and data files of `batch_dirs`, local or in an object store.
pub(super) fn list_folders(
    ctx: &Context,
    batch_dirs: &[impl AsRef<Path>],
) -> Result<discover::Discovery> {
    let dirs: Vec<std::path::PathBuf> = batch_dirs
        .iter()
        .map(|d| d.as_ref().to_path_buf())
        .collect();
    let (batch_id, landing_path) = (
        ctx.config.batch_id.as_deref(),
        ctx.config.landing_path.as_deref(),
    );
    let remote = dirs.iter().any(|d| d.to_string_lossy().contains("://"));
    let found = if remote {
        discover::discover_folders_with(&dirs, batch_id, landing_path, &mut |dir, i, listed| {
            let Location::Url(url) = Location::parse(&dir.to_string_lossy())? else {
                return Err(Error::Config {
                    name: "batch folder",
                    reason: format!(
                        "{} is local while other folders of the batch are in an object store: load them separately",
                        dir.display()
                    ),
                });
            };
            let store = ctx.store_of(&url)?;
            ctx.runtime()
                .block_on(discover::list_store_folder(store.as_ref(), &url, i, listed))?;
            Ok(dir.to_path_buf())
        })?
    } else {
        discover::discover_folders(&dirs, batch_id, landing_path)?
    };
    Ok(found)
}

/// The landing path and batch id a failed run's folders name (the settings' when
/// given), for its metrics; `None` when the folders name none.
pub(super) fn folder_identity(
    ctx: &Context,
    batch_dirs: &[impl AsRef<Path>],
) -> Option<(String, String)> {
    let dir = batch_dirs.first()?.as_ref();
    let name = dir.file_name()?.to_str()?;
    let batch_id = match &ctx.config.batch_id {
        Some(id) => id.clone(),
        None => name.strip_prefix("batch_id=")?.to_string(),
    };
    let landing_path = match &ctx.config.landing_path {
        Some(p) => p.clone(),
        None => {
            let entity = dir.parent()?;
            let source = entity.parent()?;
            format!(
                "{}/{}",
                source.file_name()?.to_str()?,
                entity.file_name()?.to_str()?
            )
        }
    };
    Some((landing_path, batch_id))
}
