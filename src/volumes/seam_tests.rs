//! The volumes through the create pipeline (in-memory agent).
