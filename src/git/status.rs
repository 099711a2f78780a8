//! Parsing of `git status --porcelain=1 -b` and of
//! `git branch --format=%(refname:short)<TAB>%(HEAD)`.

/// What `git status` says about a repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GitStatus {
    /// The checked-out branch (`None` when HEAD is detached).
    pub current_branch: Option<String>,
    /// The upstream branch, e.g. `origin/main`, when one is set.
    pub upstream: Option<String>,
    /// Commits on the branch that the upstream lacks.
    pub ahead: u32,
    /// Commits on the upstream that the branch lacks.
    pub behind: u32,
    /// HEAD is detached.
    pub detached: bool,
    /// One entry per changed, untracked or conflicted path.
    pub files: Vec<GitFileStatus>,
}

impl GitStatus {
    /// Nothing changed, staged or untracked.
    pub fn is_clean(&self) -> bool {
        self.files.is_empty()
    }

    /// Some path has a change staged in the index.
    pub fn has_staged(&self) -> bool {
        self.files.iter().any(|f| f.staged)
    }

    /// Some path is untracked.
    pub fn has_untracked(&self) -> bool {
        self.files
            .iter()
            .any(|f| f.status == GitFileState::Untracked)
    }

    /// Some path is in conflict (an unfinished merge, rebase or cherry-pick).
    pub fn has_conflicts(&self) -> bool {
        self.files
            .iter()
            .any(|f| f.status == GitFileState::Conflict)
    }
}

/// One path of [`GitStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GitFileStatus {
    /// The path, relative to the repository's top (the new name of a rename).
    pub name: String,
    /// The old name of a renamed or copied path.
    pub renamed_from: Option<String>,
    /// What happened to it.
    pub status: GitFileState,
    /// Git's index (staged) letter: `M`, `A`, `D`, `R`, `C`, `U`, `?`, ` `, ...
    pub index_status: char,
    /// Git's working-tree letter.
    pub working_tree_status: char,
    /// A change of it is staged (its index letter is neither a space nor `?`).
    pub staged: bool,
}

/// The state of a path, from git's two status letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GitFileState {
    /// Both sides changed it (`DD AU UD UA DU AA UU`).
    Conflict,
    /// Renamed.
    Renamed,
    /// Copied.
    Copied,
    /// Deleted.
    Deleted,
    /// Added.
    Added,
    /// Modified.
    Modified,
    /// Its type changed (a file became a link, say).
    TypeChanged,
    /// Not tracked.
    Untracked,
    /// A letter this SDK does not know (`!` for ignored, say).
    Unknown,
}

impl GitFileState {
    /// The state's name: `conflict`, `renamed`, `copied`, `deleted`,
    /// `added`, `modified`, `typechange`, `untracked` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conflict => "conflict",
            Self::Renamed => "renamed",
            Self::Copied => "copied",
            Self::Deleted => "deleted",
            Self::Added => "added",
            Self::Modified => "modified",
            Self::TypeChanged => "typechange",
            Self::Untracked => "untracked",
            Self::Unknown => "unknown",
        }
    }

    /// From the two letters of a porcelain line: a conflict pair first,
    /// else the first of `U R C D A M T ?` that either letter is.
    fn from_letters(index: char, tree: char) -> Self {
        const CONFLICTS: [(char, char); 7] = [
            ('D', 'D'),
            ('A', 'U'),
            ('U', 'D'),
            ('U', 'A'),
            ('D', 'U'),
            ('A', 'A'),
            ('U', 'U'),
        ];
        if CONFLICTS.contains(&(index, tree)) {
            return Self::Conflict;
        }
        let order = [
            ('U', Self::Conflict),
            ('R', Self::Renamed),
            ('C', Self::Copied),
            ('D', Self::Deleted),
            ('A', Self::Added),
            ('M', Self::Modified),
            ('T', Self::TypeChanged),
            ('?', Self::Untracked),
        ];
        order
            .iter()
            .find(|(letter, _)| index == *letter || tree == *letter)
            .map_or(Self::Unknown, |(_, state)| *state)
    }
}

/// The local branches of a repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GitBranches {
    /// Every local branch, in git's order.
    pub branches: Vec<String>,
    /// The checked-out one (`None` when HEAD is detached or has no commit).
    pub current: Option<String>,
}

/// Parses `git status --porcelain=1 -b`. Lines it does not understand are
/// skipped (the output is the sandbox's, so never trusted to be well formed).
pub(crate) fn parse_status(text: &str) -> GitStatus {
    let mut status = GitStatus::default();
    for line in text.lines() {
        if let Some(branch) = line.strip_prefix("## ") {
            parse_branch_line(branch, &mut status);
        } else if let Some(file) = parse_file_line(line) {
            status.files.push(file);
        }
    }
    status
}

/// `main...origin/main [ahead 1, behind 2]`, `main`, `No commits yet on
/// main`, `HEAD (no branch)`.
fn parse_branch_line(line: &str, status: &mut GitStatus) {
    let (names, counts) = match line.find(" [") {
        Some(at) if line.ends_with(']') => (&line[..at], Some(&line[at + 2..line.len() - 1])),
        _ => (line, None),
    };
    if names.starts_with("HEAD (") || names == "HEAD" {
        status.detached = true;
        return;
    }
    let names = names
        .strip_prefix("No commits yet on ")
        .or_else(|| names.strip_prefix("Initial commit on "))
        .unwrap_or(names);
    match names.split_once("...") {
        Some((branch, upstream)) => {
            status.current_branch = Some(branch.to_owned());
            status.upstream = (!upstream.is_empty()).then(|| upstream.to_owned());
        }
        None => status.current_branch = (!names.is_empty()).then(|| names.to_owned()),
    }
    for part in counts.into_iter().flat_map(|c| c.split(", ")) {
        if let Some(n) = part.strip_prefix("ahead ") {
            status.ahead = n.parse().unwrap_or(0);
        } else if let Some(n) = part.strip_prefix("behind ") {
            status.behind = n.parse().unwrap_or(0);
        }
    }
}

/// `XY path` or `XY old -> new`; names may be C-quoted.
fn parse_file_line(line: &str) -> Option<GitFileStatus> {
    let mut chars = line.chars();
    let index = chars.next()?;
    let tree = chars.next()?;
    let rest = chars.as_str().strip_prefix(' ')?;
    if rest.is_empty() {
        return None;
    }
    let state = GitFileState::from_letters(index, tree);
    let (name, renamed_from) = match state {
        GitFileState::Renamed | GitFileState::Copied => match split_rename(rest) {
            Some((from, to)) => (unquote(to), Some(unquote(from))),
            None => (unquote(rest), None),
        },
        _ => (unquote(rest), None),
    };
    Some(GitFileStatus {
        name,
        renamed_from,
        status: state,
        index_status: index,
        working_tree_status: tree,
        staged: index != ' ' && index != '?',
    })
}

/// Splits `old -> new` at the arrow outside quotes.
fn split_rename(rest: &str) -> Option<(&str, &str)> {
    if rest.starts_with('"') {
        // The first name is quoted: find its closing quote.
        let mut escaped = false;
        for (at, c) in rest.char_indices().skip(1) {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    let tail = rest[at + 1..].strip_prefix(" -> ")?;
                    return Some((&rest[..=at], tail));
                }
                _ => escaped = false,
            }
        }
        return None;
    }
    rest.split_once(" -> ")
}

/// Undoes git's C-style quoting of a path (`"a\tb"`, `"\303\251"`); a
/// plain name is returned as it is. Bad escapes are kept literally.
fn unquote(name: &str) -> String {
    let Some(inner) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) else {
        return name.to_owned();
    };
    let mut bytes = Vec::with_capacity(inner.len());
    let raw = inner.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b != b'\\' || i + 1 >= raw.len() {
            bytes.push(b);
            i += 1;
            continue;
        }
        let next = raw[i + 1];
        let simple = match next {
            b'n' => Some(b'\n'),
            b't' => Some(b'\t'),
            b'r' => Some(b'\r'),
            b'a' => Some(7),
            b'b' => Some(8),
            b'f' => Some(12),
            b'v' => Some(11),
            b'"' => Some(b'"'),
            b'\\' => Some(b'\\'),
            _ => None,
        };
        if let Some(c) = simple {
            bytes.push(c);
            i += 2;
            continue;
        }
        let octal = raw.get(i + 1..i + 4).and_then(|d| {
            d.iter()
                .all(|c| (b'0'..=b'7').contains(c))
                .then(|| d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0')))
        });
        match octal.and_then(|v| u8::try_from(v).ok()) {
            Some(v) => {
                bytes.push(v);
                i += 4;
            }
            None => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Parses `git branch --format=%(refname:short)<TAB>%(HEAD)`; a detached
/// HEAD's `(HEAD detached at ...)` line is not a branch.
pub(crate) fn parse_branches(text: &str) -> GitBranches {
    let mut out = GitBranches::default();
    for line in text.lines() {
        let (name, head) = line.split_once('\t').unwrap_or((line, ""));
        if name.is_empty() || name.starts_with('(') {
            continue;
        }
        if head.trim() == "*" {
            out.current = Some(name.to_owned());
        }
        out.branches.push(name.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_lines() {
        type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, u32, u32, bool);
        let cases: [Case<'_>; 8] = [
            ("## main", Some("main"), None, 0, 0, false),
            (
                "## main...origin/main",
                Some("main"),
                Some("origin/main"),
                0,
                0,
                false,
            ),
            (
                "## main...origin/main [ahead 2]",
                Some("main"),
                Some("origin/main"),
                2,
                0,
                false,
            ),
            (
                "## main...origin/main [behind 3]",
                Some("main"),
                Some("origin/main"),
                0,
                3,
                false,
            ),
            (
                "## f/x...up/f/x [ahead 1, behind 12]",
                Some("f/x"),
                Some("up/f/x"),
                1,
                12,
                false,
            ),
            (
                "## main...origin/main [gone]",
                Some("main"),
                Some("origin/main"),
                0,
                0,
                false,
            ),
            (
                "## No commits yet on trunk",
                Some("trunk"),
                None,
                0,
                0,
                false,
            ),
            ("## HEAD (no branch)", None, None, 0, 0, true),
        ];
        for (line, branch, upstream, ahead, behind, detached) in cases {
            let s = parse_status(line);
            assert_eq!(s.current_branch.as_deref(), branch, "{line}");
            assert_eq!(s.upstream.as_deref(), upstream, "{line}");
            assert_eq!(
                (s.ahead, s.behind, s.detached),
                (ahead, behind, detached),
                "{line}"
            );
        }
    }

    #[test]
    fn file_letters() {
        use GitFileState as S;
        let cases = [
            ("UU a", S::Conflict, 'U', 'U', true),
            ("AA a", S::Conflict, 'A', 'A', true),
            ("DD a", S::Conflict, 'D', 'D', true),
            ("AU a", S::Conflict, 'A', 'U', true),
            ("UD a", S::Conflict, 'U', 'D', true),
            ("UA a", S::Conflict, 'U', 'A', true),
            ("DU a", S::Conflict, 'D', 'U', true),
            ("M  a", S::Modified, 'M', ' ', true),
            (" M a", S::Modified, ' ', 'M', false),
            ("MM a", S::Modified, 'M', 'M', true),
            ("A  a", S::Added, 'A', ' ', true),
            ("AM a", S::Added, 'A', 'M', true),
            (" D a", S::Deleted, ' ', 'D', false),
            ("MD a", S::Deleted, 'M', 'D', true),
            (" T a", S::TypeChanged, ' ', 'T', false),
            ("?? a", S::Untracked, '?', '?', false),
            ("!! a", S::Unknown, '!', '!', true),
        ];
        for (line, state, index, tree, staged) in cases {
            let s = parse_status(line);
            let f = &s.files[0];
            assert_eq!(f.name, "a", "{line}");
            assert_eq!(f.status, state, "{line}");
            assert_eq!(
                (f.index_status, f.working_tree_status, f.staged),
                (index, tree, staged),
                "{line}"
            );
        }
    }

    #[test]
    fn renames_and_quoted_names() {
        let s = parse_status(
            "## main\nR  old.txt -> new.txt\nC  a -> b\n?? \"sp ace\\tx\"\nR  \"a -> b\" -> c\n?? \"\\303\\251t\\303\\251\"\n",
        );
        assert_eq!(s.files.len(), 5);
        assert_eq!(s.files[0].name, "new.txt");
        assert_eq!(s.files[0].renamed_from.as_deref(), Some("old.txt"));
        assert_eq!(s.files[0].status, GitFileState::Renamed);
        assert_eq!(s.files[1].status, GitFileState::Copied);
        assert_eq!(s.files[2].name, "sp ace\tx");
        assert_eq!(s.files[3].name, "c");
        assert_eq!(s.files[3].renamed_from.as_deref(), Some("a -> b"));
        assert_eq!(s.files[4].name, "été");
        assert!(s.has_untracked() && s.has_staged() && !s.is_clean() && !s.has_conflicts());
    }

    #[test]
    fn hostile_lines_are_skipped() {
        let s = parse_status("## main...o/main [ahead 99999999999999999999]\nX\n\u{0}\nM \n");
        assert_eq!(s.ahead, 0);
        assert!(s.files.is_empty());
        assert!(parse_status("").is_clean());
    }

    #[test]
    fn branches() {
        let b = parse_branches("feature\t \nmain\t*\n");
        assert_eq!(b.branches, ["feature", "main"]);
        assert_eq!(b.current.as_deref(), Some("main"));
        let b = parse_branches("(HEAD detached at 1a2b3c)\t*\nmain\t \n");
        assert_eq!(b.branches, ["main"]);
        assert_eq!(b.current, None);
        assert_eq!(parse_branches(""), GitBranches::default());
    }
}
