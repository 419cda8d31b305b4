//! Model providers: one client for the three API modes, with a fallback chain.
