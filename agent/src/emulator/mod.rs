//! The local emulator of the Lambda MicroVMs control plane and its proxy.
//! (Being written.)
