//! Thread scaling (W1). Filled in below.
