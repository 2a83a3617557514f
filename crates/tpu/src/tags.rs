//! MetaGraphDef tag-sets: list them, and add (duplicate a MetaGraphDef under a new tag-set,
//! sharing the variables, as `TPUEstimator` exports do), replace or remove them. Loaders match
//! tag-sets exactly and as sets, so two MetaGraphDefs with the same set are refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;
use unbound_records::WriterOptions;

use crate::error::{Result, TpuError};
use crate::model::Model;

/// Parses `serve,tpu` into a tag list (order kept; empty, blank and repeated tags refused).
pub fn parse_tag_set(text: &str) -> Result<Vec<String>> {
    let bad = |fault: &str| TpuError::BadTagSet {
        text: text.to_string(),
        fault: fault.to_string(),
    };
    let tags: Vec<String> = text.split(',').map(|t| t.trim().to_string()).collect();
    if tags.iter().any(String::is_empty) {
        return Err(bad("a tag is empty"));
    }
    let set: BTreeSet<&String> = tags.iter().collect();
    if set.len() != tags.len() {
        return Err(bad("a tag is repeated"));
    }
    Ok(tags)
}

/// Whether two tag lists are the same set (as loaders compare them).
pub fn same_tag_set(a: &[String], b: &[String]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

/// The tag-sets of the SavedModel in `dir`, in MetaGraphDef order.
pub fn list_tag_sets(dir: &Path) -> Result<Vec<Vec<String>>> {
    Model::open(dir)?.tag_sets()
}

/// One change to a model's tag-sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagEdit {
    /// Append a copy of the MetaGraphDef tagged `from`, tagged `to`.
    Duplicate {
        /// The tag-set copied.
        from: Vec<String>,
        /// The new tag-set.
        to: Vec<String>,
    },
    /// Retag the MetaGraphDef tagged `from` as `to`.
    Replace {
        /// The tag-set changed.
        from: Vec<String>,
        /// What it becomes.
        to: Vec<String>,
    },
    /// Remove the MetaGraphDef tagged `tags`.
    Remove {
        /// Its tag-set.
        tags: Vec<String>,
    },
}

/// What [`edit_tags`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct TagsReport {
    /// The tag-sets of the written model, in order.
    pub tag_sets: Vec<Vec<String>>,
    /// The model file written.
    pub written: PathBuf,
}

/// Applies `edits` in order to the model in `src` and writes the result to `out` (which must
/// not exist). Nothing is written when an edit is refused.
pub fn edit_tags(
    src: &Path,
    out: &Path,
    edits: &[TagEdit],
    max_size: u64,
    options: WriterOptions,
) -> Result<TagsReport> {
    let model = Model::open_verified(src)?;
    let mut metas = model.meta_graphs.clone();
    let mut tag_sets = model.tag_sets()?;
    for edit in edits {
        match edit {
            TagEdit::Duplicate { from, to } => {
                let i = find(src, &tag_sets, from)?;
                refuse_existing(src, &tag_sets, to, None)?;
                let mut copy = metas[i].clone();
                Model::set_tags(&mut copy, to)?;
                metas.push(copy);
                tag_sets.push(to.clone());
            }
            TagEdit::Replace { from, to } => {
                let i = find(src, &tag_sets, from)?;
                refuse_existing(src, &tag_sets, to, Some(i))?;
                Model::set_tags(&mut metas[i], to)?;
                tag_sets[i] = to.clone();
            }
            TagEdit::Remove { tags } => {
                let i = find(src, &tag_sets, tags)?;
                if metas.len() == 1 {
                    return Err(TpuError::Unsupported {
                        dir: src.to_path_buf(),
                        fault: format!(
                            "{{{}}} is the only MetaGraphDef; a SavedModel needs one",
                            tags.join(",")
                        ),
                    });
                }
                metas.remove(i);
                tag_sets.remove(i);
            }
        }
    }
    let report = model.write(metas, out, max_size, options)?;
    Ok(TagsReport {
        tag_sets,
        written: report.written.path,
    })
}

/// The index of the MetaGraphDef tagged `tags`.
pub fn find(dir: &Path, tag_sets: &[Vec<String>], tags: &[String]) -> Result<usize> {
    if tag_sets.is_empty() {
        return Err(TpuError::NoMetaGraph {
            dir: dir.to_path_buf(),
        });
    }
    tag_sets
        .iter()
        .position(|t| same_tag_set(t, tags))
        .ok_or_else(|| TpuError::NoSuchTagSet {
            dir: dir.to_path_buf(),
            tags: tags.to_vec(),
            available: tag_sets.to_vec(),
        })
}

/// Refuses `tags` when a MetaGraphDef other than `except` has that tag-set.
pub fn refuse_existing(
    dir: &Path,
    tag_sets: &[Vec<String>],
    tags: &[String],
    except: Option<usize>,
) -> Result<()> {
    let clash = tag_sets
        .iter()
        .enumerate()
        .any(|(i, t)| Some(i) != except && same_tag_set(t, tags));
    if clash {
        return Err(TpuError::TagSetExists {
            dir: dir.to_path_buf(),
            tags: tags.to_vec(),
        });
    }
    Ok(())
}
