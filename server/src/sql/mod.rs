//! The server's own statements (the producer library runs the rest). Static
//! strings with bound parameters: no SQL is built from input.

pub mod dashboard;
