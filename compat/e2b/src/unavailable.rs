//! E2B's `Template` and `Volume` classes: every method exists
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
    /// E2B's `Template`: its build service. `rayito::template::Template`
    /// (the SDK's `templates` feature) has E2B's builder names
    /// (`from_image`, `from_template`, `skip_cache`, ...), and
    /// `rayito template build` builds the image.
    Template,
    Missing::Template,
    [
        /// `Template.alias_exists(alias)`.
        fn alias_exists(alias);
        /// `Template.assign_tags(target_name, tags)`.
        fn assign_tags(target_name, tags);
        /// `Template.build(template, name)`.
        fn build(template, name);
        /// `Template.build_in_background(template, name)`.
        fn build_in_background(template, name);
        /// `Template.exists(name)`.
        fn exists(name);
        /// `Template().from_alpine_image(variant)`.
        fn from_alpine_image(variant);
        /// `Template().from_arch_image(variant)`.
        fn from_arch_image(variant);
        /// `Template().from_aws_registry(image, access_key_id, secret_access_key, region)`.
        fn from_aws_registry(image, access_key_id, secret_access_key, region);
        /// `Template().from_base_image()`.
        fn from_base_image();
        /// `Template().from_bun_image(variant)`.
        fn from_bun_image(variant);
        /// `Template().from_debian_image(variant)`.
        fn from_debian_image(variant);
        /// `Template().from_dockerfile(dockerfile_content_or_path)`.
        fn from_dockerfile(dockerfile_content_or_path);
        /// `Template().from_fedora_image(variant)`.
        fn from_fedora_image(variant);
        /// `Template().from_gcp_registry(image, service_account_json)`.
        fn from_gcp_registry(image, service_account_json);
        /// `Template().from_image(image)`.
        fn from_image(image);
        /// `Template().from_node_image(variant)`.
        fn from_node_image(variant);
        /// `Template().from_python_image(version)`.
        fn from_python_image(version);
        /// `Template().from_template(template)`.
        fn from_template(template);
        /// `Template().from_ubuntu_image(variant)`.
        fn from_ubuntu_image(variant);
        /// `Template.get_build_status(build_info)`.
        fn get_build_status(build_info);
        /// `Template.get_tags(template_id)`.
        fn get_tags(template_id);
        /// `Template.remove_tags(name, tags)`.
        fn remove_tags(name, tags);
        /// `Template().skip_cache()`.
        fn skip_cache();
        /// `Template.to_dockerfile(template)`.
        fn to_dockerfile(template);
        /// `Template.to_json(template)`.
        fn to_json(template);
    ]
);

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
