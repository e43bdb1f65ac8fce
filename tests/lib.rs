//! Cross-crate tests of Skein live in this crate's `tests/` targets; the library is empty.
