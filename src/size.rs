//! Sandbox sizes: the catalog of memory and vCPU a published image can
//! have ([`Size`]), a request by memory that rounds up to it
//! ([`SizeRequest`]), and the image each size runs (`<template>-<size>`,
//! the baseline unsuffixed).

use std::fmt;
use std::str::FromStr;

use crate::checks::{SIZE_TOO_LARGE, SIZE_UNKNOWN, SIZE_WITH_ARN, SIZE_ZERO, refuse};
use crate::error::SandboxError;

/// One size of the catalog: an image's memory and its vCPUs (1 vCPU per
/// 512 MiB). [`Size::Baseline`] (2 GiB) is the size `rayito image publish`
/// builds without `--sizes`; the others are images of their own, named
/// `<template>-<size>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Size {
    /// `512mb`: 512 MiB, 1 vCPU.
    Mb512,
    /// `1gb`: 1024 MiB, 2 vCPUs.
    Gb1,
    /// `2gb`: 2048 MiB, 4 vCPUs; the baseline (the unsuffixed image).
    Baseline,
    /// `4gb`: 4096 MiB, 8 vCPUs.
    Gb4,
    /// `8gb`: 8192 MiB, 16 vCPUs.
    Gb8,
}

/// The memory of the baseline size, MiB.
pub const BASELINE_MEMORY_MIB: u32 = 2048;

impl Size {
    /// Every size, smallest first.
    pub const ALL: [Size; 5] = [Size::Mb512, Size::Gb1, Size::Baseline, Size::Gb4, Size::Gb8];

    /// Its name: `512mb`, `1gb`, `2gb`, `4gb`, `8gb`.
    pub fn name(self) -> &'static str {
        match self {
            Size::Mb512 => "512mb",
            Size::Gb1 => "1gb",
            Size::Baseline => "2gb",
            Size::Gb4 => "4gb",
            Size::Gb8 => "8gb",
        }
    }

    /// Its memory in MiB (the image's `minimumMemoryInMiB`).
    pub fn memory_mib(self) -> u32 {
        match self {
            Size::Mb512 => 512,
            Size::Gb1 => 1024,
            Size::Baseline => BASELINE_MEMORY_MIB,
            Size::Gb4 => 4096,
            Size::Gb8 => 8192,
        }
    }

    /// Its vCPUs.
    pub fn vcpus(self) -> u32 {
        self.memory_mib() / 512
    }

    /// Whether this is the baseline (its image carries no suffix).
    pub fn is_baseline(self) -> bool {
        self == Size::Baseline
    }

    /// The smallest size with at least `memory_mib` MiB; a request between
    /// two sizes rounds up (with a warning).
    ///
    /// # Errors
    /// `InvalidArgument` (`size`) for 0 or more than 8192 MiB.
    pub fn for_memory_mib(memory_mib: u32) -> Result<Size, SandboxError> {
        if memory_mib == 0 {
            return Err(refuse(SIZE_ZERO));
        }
        let size = Size::ALL
            .into_iter()
            .find(|s| s.memory_mib() >= memory_mib)
            .ok_or_else(|| refuse(SIZE_TOO_LARGE))?;
        if size.memory_mib() != memory_mib {
            tracing::warn!(
                target: "rayito::size",
                requested_mib = memory_mib,
                size = size.name(),
                "no size has exactly the requested memory; rounded up"
            );
        }
        Ok(size)
    }

    /// The image this size runs for `template` (an image name):
    /// `<template>-<size>`, or `template` itself for the baseline.
    ///
    /// # Errors
    /// `InvalidArgument` (`size`) for an image ARN with any size but the
    /// baseline (an ARN names one image, it cannot be suffixed).
    pub fn image_name(self, template: &str) -> Result<String, SandboxError> {
        if self.is_baseline() {
            return Ok(template.to_owned());
        }
        if template.starts_with("arn:") {
            return Err(refuse(SIZE_WITH_ARN));
        }
        Ok(format!("{template}-{}", self.name()))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Size {
    type Err = SandboxError;

    /// A size by name (`512mb`, `1gb`, `2gb`, `4gb`, `8gb`, any case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Size::ALL
            .into_iter()
            .find(|size| size.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| refuse(SIZE_UNKNOWN))
    }
}

/// What a caller asks for: a size of the catalog, or memory in MiB that
/// rounds up to one ([`Size::for_memory_mib`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SizeRequest {
    /// Exactly this size.
    Named(Size),
    /// The smallest size with at least this much memory (MiB).
    MemoryMib(u32),
}

impl SizeRequest {
    /// The size this request resolves to.
    ///
    /// # Errors
    /// `InvalidArgument` (`size`) as [`Size::for_memory_mib`].
    pub fn resolve(self) -> Result<Size, SandboxError> {
        match self {
            SizeRequest::Named(size) => Ok(size),
            SizeRequest::MemoryMib(mib) => Size::for_memory_mib(mib),
        }
    }
}

impl From<Size> for SizeRequest {
    fn from(size: Size) -> Self {
        SizeRequest::Named(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_maps_names_memory_vcpus_and_images() {
        let table: Vec<(&str, u32, u32, String)> = Size::ALL
            .into_iter()
            .map(|s| {
                (
                    s.name(),
                    s.memory_mib(),
                    s.vcpus(),
                    s.image_name("py").unwrap(),
                )
            })
            .collect();
        assert_eq!(
            table,
            [
                ("512mb", 512, 1, "py-512mb".to_owned()),
                ("1gb", 1024, 2, "py-1gb".to_owned()),
                ("2gb", 2048, 4, "py".to_owned()),
                ("4gb", 4096, 8, "py-4gb".to_owned()),
                ("8gb", 8192, 16, "py-8gb".to_owned()),
            ]
        );
        for size in Size::ALL {
            assert_eq!(size.name().parse::<Size>().unwrap(), size);
            assert_eq!(size.to_string(), size.name());
        }
        assert_eq!("4GB".parse::<Size>().unwrap(), Size::Gb4);
        assert_eq!(
            "3gb".parse::<Size>().unwrap_err().to_string(),
            "invalid size: unknown size; pass one of 512mb, 1gb, 2gb, 4gb, 8gb"
        );
    }

    #[test]
    fn memory_rounds_up_and_above_8192_is_refused() {
        let cases = [
            (1, Size::Mb512),
            (512, Size::Mb512),
            (513, Size::Gb1),
            (1024, Size::Gb1),
            (1500, Size::Baseline),
            (2048, Size::Baseline),
            (3000, Size::Gb4),
            (8000, Size::Gb8),
            (8192, Size::Gb8),
        ];
        for (mib, size) in cases {
            assert_eq!(
                SizeRequest::MemoryMib(mib).resolve().unwrap(),
                size,
                "{mib}"
            );
        }
        let err = Size::for_memory_mib(8193).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        assert_eq!(
            err.to_string(),
            "invalid size: the largest size is 8gb (8192 MiB); pass at most 8192 MiB"
        );
        assert_eq!(
            Size::for_memory_mib(0).unwrap_err().to_string(),
            "invalid size: a size's memory must be at least 1 MiB; pass 512 to 8192 MiB or a size name"
        );
    }

    #[test]
    fn an_arn_takes_only_the_baseline() {
        let arn = "arn:aws:lambda:us-east-1:123456789012:microvm-image:py";
        assert_eq!(Size::Baseline.image_name(arn).unwrap(), arn);
        assert_eq!(
            Size::Gb4.image_name(arn).unwrap_err().to_string(),
            "invalid size: a size picks the image <template>-<size> by name, and the template is an image ARN; pass the template's name, or the sized image's ARN without a size"
        );
    }
}
