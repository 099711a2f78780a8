//! The Code service: stateful kernels ("contexts") driven by a small driver
//! program the agent ships. (Being written.)
