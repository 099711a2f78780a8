//! CreateAccessPoint, DescribeAccessPoints (one page) and
//! DeleteAccessPoint: what the volume store reads and writes.

use aws_sdk_efs::types::{CreationInfo, PosixUser, RootDirectory, Tag};

use super::{Efs, failure};
use crate::error::map::aws::AwsFailure;
use crate::quiet::Quiet as _;

/// An access point as DescribeAccessPoints shows it (only what the store
/// uses).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AccessPoint {
    pub id: String,
    pub arn: Option<String>,
    pub file_system_id: String,
    /// The value of the tag named by the caller's `tag_key`, when present.
    pub tag: Option<String>,
    /// Its root directory's path.
    pub path: Option<String>,
    /// `available`, `creating`, `deleting`, ...
    pub state: Option<String>,
}

/// What CreateAccessPoint sends (the store decides every value).
#[derive(Clone, Debug)]
pub(crate) struct NewAccessPoint<'a> {
    pub file_system_id: &'a str,
    pub client_token: &'a str,
    pub uid: i64,
    pub gid: i64,
    pub path: &'a str,
    pub permissions: &'a str,
    pub tag_key: &'a str,
    pub tag_value: &'a str,
}

impl Efs {
    /// CreateAccessPoint; its id.
    ///
    /// # Errors
    /// The call failed (its facts).
    pub(crate) async fn create_access_point(
        &self,
        new: &NewAccessPoint<'_>,
    ) -> Result<AccessPoint, AwsFailure> {
        const OP: &str = "CreateAccessPoint";
        // The builders fail only on a missing required member, set here.
        let posix = PosixUser::builder()
            .uid(new.uid)
            .gid(new.gid)
            .build()
            .map_err(|_| AwsFailure::new(OP))?;
        let creation = CreationInfo::builder()
            .owner_uid(new.uid)
            .owner_gid(new.gid)
            .permissions(new.permissions)
            .build()
            .map_err(|_| AwsFailure::new(OP))?;
        let tag = Tag::builder()
            .key(new.tag_key)
            .value(new.tag_value)
            .build()
            .map_err(|_| AwsFailure::new(OP))?;
        let out = self
            .client
            .create_access_point()
            .client_token(new.client_token)
            .file_system_id(new.file_system_id)
            .posix_user(posix)
            .root_directory(
                RootDirectory::builder()
                    .path(new.path)
                    .creation_info(creation)
                    .build(),
            )
            .tags(tag)
            .send()
            .quiet()
            .await
            .map_err(|e| failure(OP, &e))?;
        Ok(AccessPoint {
            id: out.access_point_id().unwrap_or_default().to_owned(),
            arn: out.access_point_arn().map(str::to_owned),
            file_system_id: new.file_system_id.to_owned(),
            tag: Some(new.tag_value.to_owned()),
            path: Some(new.path.to_owned()),
            state: out.life_cycle_state().map(|s| s.as_str().to_owned()),
        })
    }

    /// One page of DescribeAccessPoints on `file_system_id`, with the
    /// value of tag `tag_key` of each, and the next page's token.
    ///
    /// # Errors
    /// The call failed (its facts).
    pub(crate) async fn access_points_page(
        &self,
        file_system_id: &str,
        tag_key: &str,
        next_token: Option<String>,
    ) -> Result<(Vec<AccessPoint>, Option<String>), AwsFailure> {
        const OP: &str = "DescribeAccessPoints";
        let out = self
            .client
            .describe_access_points()
            .file_system_id(file_system_id)
            .set_next_token(next_token)
            .send()
            .quiet()
            .await
            .map_err(|e| failure(OP, &e))?;
        let points = out
            .access_points()
            .iter()
            .map(|ap| AccessPoint {
                id: ap.access_point_id().unwrap_or_default().to_owned(),
                arn: ap.access_point_arn().map(str::to_owned),
                file_system_id: ap.file_system_id().unwrap_or(file_system_id).to_owned(),
                tag: ap
                    .tags()
                    .iter()
                    .find(|t| t.key() == tag_key)
                    .map(|t| t.value().to_owned()),
                path: ap
                    .root_directory()
                    .and_then(|r| r.path())
                    .map(str::to_owned),
                state: ap.life_cycle_state().map(|s| s.as_str().to_owned()),
            })
            .collect();
        let next = out
            .next_token()
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        Ok((points, next))
    }

    /// DeleteAccessPoint.
    ///
    /// # Errors
    /// The call failed (its facts).
    pub(crate) async fn delete_access_point(
        &self,
        access_point_id: &str,
    ) -> Result<(), AwsFailure> {
        self.client
            .delete_access_point()
            .access_point_id(access_point_id)
            .send()
            .quiet()
            .await
            .map(|_| ())
            .map_err(|e| failure("DeleteAccessPoint", &e))
    }
}
