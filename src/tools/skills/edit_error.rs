//! Why `skill_manage` refused a change: one variant per rule of `manage.rs` (names, SKILL.md
//! shape, sizes, where supporting files may live, which skills are the agent's to change),
//! the guard's report, and file errors naming the path. The Display texts are what the
//! model reads back, so they say what to do differently.

use std::path::{Path, PathBuf};

use super::limits::{
    MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_SKILL_CHARS, MAX_SUPPORT_FILE_BYTES,
};
use crate::skills::SUPPORT_DIRS;

/// Why `skill_manage` changed nothing; the text is the `error` the model reads.
#[derive(Debug, thiserror::Error)]
pub(super) enum SkillEditError {
    #[error("'{0}' is not an action skill_manage knows (see the enum in its schema).")]
    UnknownAction(String),
    /// `what` is "skill name" or "category".
    #[error("A {what} is required.")]
    NameMissing { what: &'static str },
    #[error("The {what} is longer than {MAX_NAME_CHARS} characters.")]
    NameTooLong { what: &'static str },
    #[error(
        "'{name}' is not a valid {what}: start with a lowercase letter or digit, then use only lowercase letters, digits, '.', '_' and '-'."
    )]
    NameInvalid { name: String, what: &'static str },
    #[error("SKILL.md cannot be empty.")]
    SkillMdEmpty,
    #[error(
        "SKILL.md would be {chars} characters, over the {MAX_SKILL_CHARS} limit; move detail into references/ files."
    )]
    SkillMdTooLong { chars: usize },
    #[error("SKILL.md must open with YAML frontmatter between '---' lines.")]
    NoFrontmatter,
    #[error("The frontmatter is not a YAML mapping of keys to values.")]
    FrontmatterNotAMapping,
    #[error("The frontmatter has no closing '---' line.")]
    FrontmatterUnclosed,
    #[error("The frontmatter is not valid YAML: {0}")]
    FrontmatterYaml(#[source] serde_norway::Error),
    #[error("The frontmatter needs a '{0}' field.")]
    FrontmatterField(&'static str),
    #[error("The description is longer than {MAX_DESCRIPTION_CHARS} characters.")]
    DescriptionTooLong,
    #[error("SKILL.md needs instructions after the frontmatter.")]
    NoInstructions,
    #[error(
        "Skill '{0}' lives in an external skills directory, which is read-only; create a copy in the home instead."
    )]
    External(String),
    #[error("No skill named '{name}' in {}.", root.display())]
    NotFound { name: String, root: PathBuf },
    #[error("A skill named '{name}' already exists at {}.", dir.display())]
    Exists { name: String, dir: PathBuf },
    #[error("old_string is required for a patch.")]
    NoOldString,
    #[error("old_string does not occur in the file; view it and copy the text exactly.")]
    OldStringAbsent,
    #[error(
        "old_string occurs {0} times; add surrounding text to make it unique, or set replace_all."
    )]
    OldStringRepeated(usize),
    #[error("The file would exceed {MAX_SUPPORT_FILE_BYTES} bytes.")]
    PatchedFileTooLarge,
    #[error("The file is {0} bytes, over the {MAX_SUPPORT_FILE_BYTES}-byte limit.")]
    SupportFileTooLarge(usize),
    #[error(
        "Refusing to delete {}: it is not a skill directory inside the home.",
        .0.display()
    )]
    NotASkillDir(PathBuf),
    #[error("'{0}' must be a relative path inside the skill.")]
    NotRelative(String),
    #[error("Paths may not contain '..' or start at the root.")]
    Climbs,
    #[error("Supporting files go under {dirs}; got '{path}'.", dirs = SUPPORT_DIRS.join(", "))]
    OutsideSupportDirs { path: String },
    #[error("'{path}' names a directory; give a file, e.g. '{first}/notes.md'.")]
    NamesADirectory { path: String, first: String },
    #[error("'{0}' resolves outside the skill's directory.")]
    Escapes(String),
    #[error("SKILL.md cannot be removed on its own; delete the skill instead.")]
    SkillMdAlone,
    #[error("'{path}' is not a file of '{name}'.")]
    NotAFile { path: String, name: String },
    #[error(transparent)]
    Refused(#[from] super::guard::GuardRefusal),
    /// A file step; `action` is the verb (read, write, create, delete, remove).
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A `map_err` adapter for a file step `action` on `path`.
pub(super) fn io_error(
    action: &'static str,
    path: &Path,
) -> impl FnOnce(std::io::Error) -> SkillEditError {
    let path = path.to_path_buf();
    move |source| SkillEditError::Io {
        action,
        path,
        source,
    }
}
