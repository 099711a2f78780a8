//! DescribeFileSystems (its tags), DescribeMountTargets (how many are
//! left) and DeleteFileSystem: what `EfsVolumes::delete_file_system`
//! needs to delete the file system the stack retains, and only that one.

use super::{Efs, failure};
use crate::error::map::aws::AwsFailure;
use crate::quiet::Quiet as _;

impl Efs {
    /// The tags of `file_system_id` (key, value), `None` when DescribeFileSystems
    /// lists nothing for it.
    ///
    /// # Errors
    /// The call failed (its facts; `FileSystemNotFound` among them).
    pub(crate) async fn file_system_tags(
        &self,
        file_system_id: &str,
    ) -> Result<Option<Vec<(String, String)>>, AwsFailure> {
        let out = self
            .client
            .describe_file_systems()
            .file_system_id(file_system_id)
            .send()
            .quiet()
            .await
            .map_err(|e| failure("DescribeFileSystems", &e))?;
        Ok(out.file_systems().first().map(|fs| {
            fs.tags()
                .iter()
                .map(|t| (t.key().to_owned(), t.value().to_owned()))
                .collect()
        }))
    }

    /// How many mount targets `file_system_id` still has (the first page:
    /// at most one per AZ, so one page is all of them).
    ///
    /// # Errors
    /// The call failed (its facts).
    pub(crate) async fn mount_target_count(
        &self,
        file_system_id: &str,
    ) -> Result<usize, AwsFailure> {
        let out = self
            .client
            .describe_mount_targets()
            .file_system_id(file_system_id)
            .send()
            .quiet()
            .await
            .map_err(|e| failure("DescribeMountTargets", &e))?;
        Ok(out.mount_targets().len())
    }

    /// DeleteFileSystem (every file in it goes with it).
    ///
    /// # Errors
    /// The call failed (its facts).
    pub(crate) async fn delete_file_system(&self, file_system_id: &str) -> Result<(), AwsFailure> {
        self.client
            .delete_file_system()
            .file_system_id(file_system_id)
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|e| failure("DeleteFileSystem", &e))
    }
}
