//! The LCS rule language (seed 000 §5): written by the rules helper.
