//! `${VAR}` expansion in config values, and where variables come from.

/// Where an environment variable's value comes from; the process environment in production,
/// a map in tests.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as an [`EnvLookup`].
pub(super) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Why a value's `${VAR}` could not be expanded.
pub(super) enum ExpandError {
    /// The variable is not set.
    Missing(String),
    /// A `${` with no `}` after it.
    Unclosed,
}

/// `${VAR}` → the variable's value; `$${` is a literal `${`.
pub(super) fn expand_vars(value: &str, env: EnvLookup<'_>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let end = after.find('}').ok_or(ExpandError::Unclosed)?;
            let name = &after[..end];
            let val = env(name).ok_or_else(|| ExpandError::Missing(name.to_owned()))?;
            out.push_str(&val);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}
