//! E2B's `Volume` class: every method exists
//! with E2B's name and fails `Unimplemented` naming its surface, before any
//! call. E2B's arguments are taken as one value each (any type) so a port
//! compiles; none is read.

use rayito::SandboxError;

use crate::unimplemented::Missing;

/// Declares unit structs whose every listed method returns `$missing`.
macro_rules! unavailable {
    ($(#[$doc:meta])* $name:ident, $missing:expr, [$($(#[$mdoc:meta])* fn $method:ident($($arg:ident),*);)*]) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $name;

        impl $name {
            $(
                $(#[$mdoc])*
                ///
                /// # Errors
                /// Always `Unimplemented`, with no call made.
                #[allow(clippy::unused_async)]
                pub async fn $method($($arg: impl Send),*) -> Result<std::convert::Infallible, SandboxError> {
                    $(let _ = $arg;)*
                    Err($missing.error())
                }
            )*
        }
    };
}

unavailable!(
    /// E2B's `Volume`: persistent volumes outside a sandbox. Keep data
    /// across sandboxes with `rayito::persistence` (S3 checkpoints)
    /// instead.
    Volume,
    Missing::Volume,
    [
        /// `Volume.connect(volume_id)`.
        fn connect(volume_id);
        /// `Volume.create(name)`.
        fn create(name);
        /// `Volume.destroy(volume_id)`.
        fn destroy(volume_id);
        /// `volume.exists(path)`.
        fn exists(path);
        /// `Volume.get_info(volume_id)`.
        fn get_info(volume_id);
        /// `Volume.list()`.
        fn list();
        /// `volume.make_dir(path)`.
        fn make_dir(path);
        /// `volume.name`.
        fn name();
        /// `volume.read_file(path)`.
        fn read_file(path);
        /// `volume.remove(path)`.
        fn remove(path);
        /// `volume.token`.
        fn token();
        /// `volume.update_metadata(path)`.
        fn update_metadata(path);
        /// `volume.volume_id`.
        fn volume_id();
        /// `volume.write_file(path, data)`.
        fn write_file(path, data);
    ]
);
