//! Every message template of the SDK, and how they are filled in.
//!
//! Messages are English, start lower-case, have no trailing period, and say
//! what failed, then (after `; `) what remains possible. Numbers are grouped
//! for en-US (`28,800`). `docs/errors.md` transcribes [`ALL`] and a test
//! fails if the two differ.
//!
//! Placeholders are `{name}`. Some are optional fragments that render as an
//! empty string when there is nothing to say:
//! `{detail}` is `: <server text>`, `{within}` is ` within <duration>`,
//! `{see}` is `; see <doc>`.

/// One message template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Template {
    pub(crate) id: &'static str,
    pub(crate) text: &'static str,
}

macro_rules! templates {
    ($( $name:ident = $id:literal => $text:literal; )+) => {
        $( pub(crate) const $name: Template = Template { id: $id, text: $text }; )+
        /// Every template, in documentation order.
        #[cfg_attr(not(test), allow(dead_code, reason = "read by the tests and docs/errors.md"))]
        pub(crate) const ALL: &[Template] = &[$($name),+];
    };
}

templates! {
    AWS_SANDBOX_NOT_FOUND = "aws.sandbox_not_found" =>
        "control plane call {operation} found no such sandbox{detail}; it has terminated or never existed, create a new sandbox";
    AWS_IMAGE_NOT_FOUND = "aws.image_not_found" =>
        "control plane call {operation} found no such resource{detail}; the image is probably missing, check the image ARN or publish the image";
    AWS_INVALID_ARGUMENT = "aws.invalid_argument" =>
        "control plane call {operation} refused an argument{detail}; fix the value before retrying";
    AWS_AUTHENTICATION = "aws.authentication" =>
        "control plane call {operation} refused the AWS credentials ({aws_code}){detail}; check the credentials, their expiry and their IAM permissions";
    AWS_RATE_LIMIT_AFTER = "aws.rate_limit_after" =>
        "control plane call {operation} was throttled{detail}; retry after {retry_after}";
    AWS_RATE_LIMIT = "aws.rate_limit" =>
        "control plane call {operation} was throttled{detail}; retry later with backoff";
    AWS_SANDBOX_STATE = "aws.sandbox_state" =>
        "control plane call {operation} conflicts with the sandbox's current state{detail}; wait until it settles, then retry";
    AWS_QUOTA_EXCEEDED = "aws.quota_exceeded" =>
        "control plane call {operation} hit an account quota{detail}; free resources or ask AWS for a higher quota";
    AWS_CAPACITY = "aws.capacity" =>
        "control plane call {operation} found no capacity{detail}; retry later or use another region";
    AWS_SERVICE_ERROR = "aws.service_error" =>
        "control plane call {operation} failed on the service side ({cause}){detail}; retry later";
    AWS_OTHER = "aws.other" =>
        "control plane call {operation} failed ({cause}){detail}; the SDK does not retry this failure";
    AWS_TIMEOUT = "aws.timeout" =>
        "control plane call {operation} got no response before its deadline; retry it, or raise AwsOptions::read_timeout or connect_timeout";
    AWS_CONNECT = "aws.connect" =>
        "control plane call {operation} could not connect to the service; check the network, the region and the endpoint, then retry";
    AWS_NO_RESPONSE = "aws.no_response" =>
        "control plane call {operation} got no response from the service; retry it";
    AWS_PROFILE_NOT_FOUND = "aws.profile_not_found" =>
        "the AWS profile {profile} is not in the AWS config or credentials file; fix the profile name (AwsOptions::profile or AWS_PROFILE) or add the profile";
    AWS_NO_CREDENTIALS = "aws.no_credentials" =>
        "no AWS credentials or region found{detail}; configure AWS (environment variables, a profile or an instance role) or choose the local backend with RAYITO_BACKEND=local or Sandbox::builder().local()";

    GRPC_SUSPENDING = "grpc.suspending" =>
        "the sandbox is suspending ({feature}); retry once it has resumed";
    GRPC_TERMINATING = "grpc.terminating" =>
        "the sandbox is terminating ({feature}); create a new sandbox";
    GRPC_KERNEL_NOT_READY = "grpc.kernel_not_ready" =>
        "the code kernel is not ready ({feature}){detail}; retry in a few seconds";
    GRPC_SANDBOX_TIMEOUT = "grpc.sandbox_timeout" =>
        "the sandbox reached its timeout ({feature}); extend it with set_timeout before it expires, or create a new sandbox";
    GRPC_INVALID_ARGUMENT = "grpc.invalid_argument" =>
        "the agent refused an argument of {feature}{detail}; fix the value before retrying";
    GRPC_UNAUTHENTICATED = "grpc.unauthenticated" =>
        "the agent refused the access token ({feature}); connect to the sandbox again to get a valid token";
    GRPC_PERMISSION_DENIED = "grpc.permission_denied" =>
        "the agent denied permission for {feature}{detail}; use an allowed user or path";
    GRPC_PROXY_REJECTED = "grpc.proxy_rejected" =>
        "the AWS proxy refused the sandbox's token for {feature} even after a fresh one; check the IAM permission to create MicroVM auth tokens";
    GRPC_PROXY_REJECTED_ONCE = "grpc.proxy_rejected_once" =>
        "the AWS proxy refused the sandbox's token for {feature}, which was not retried with a fresh token (it cannot be replayed, or the retry policy allows no re-mint); retry the call, or check the IAM permission to create MicroVM auth tokens";
    GRPC_PATH_DENIED = "grpc.path_denied" =>
        "the sandbox's user may not use the {role} given to {feature}{detail}; pass a {role} that user may use (its home is /home/user)";
    GRPC_FILE_NOT_FOUND = "grpc.file_not_found" =>
        "file not found ({feature}){detail}; check the path";
    GRPC_NOT_FOUND = "grpc.not_found" =>
        "not found ({feature}){detail}; the process, context or execution no longer exists";
    GRPC_OUTPUT_GONE = "grpc.output_gone" =>
        "the requested output is no longer kept by the agent ({feature}); connect again from sequence 0";
    GRPC_DISK_RESERVE = "grpc.disk_reserve" =>
        "the sandbox has less than 256 MiB of free disk ({feature}); free space or use a larger disk";
    GRPC_DISK_FULL = "grpc.disk_full" =>
        "the sandbox disk is full ({feature}); free space or use a larger disk";
    GRPC_RATE_LIMIT = "grpc.rate_limit" =>
        "the agent refused {feature} at one of its limits{detail}; wait for running work to finish, then retry";
    GRPC_UNIMPLEMENTED_REASON = "grpc.unimplemented_reason" =>
        "the agent in this image does not implement it; publish an image with a newer agent";
    GRPC_CONNECTION_LOST = "grpc.connection_lost" =>
        "lost the connection to the agent during {feature}{detail}; retry, or check that the sandbox is still running";
    GRPC_OTHER = "grpc.other" =>
        "the agent failed {feature} with {grpc_code}{detail}; the SDK does not retry this failure";

    PROXY_RATE_LIMIT = "proxy.rate_limit" =>
        "the AWS proxy rate-limited {feature} (http 429); retry later with backoff";
    PROXY_UNREACHABLE = "proxy.unreachable" =>
        "the AWS proxy could not reach the sandbox for {feature} (http {http_status}); retry, or check that the sandbox is still running";
    PROXY_OTHER = "proxy.other" =>
        "the AWS proxy answered {feature} with http {http_status}; the SDK does not retry this failure";

    STREAM_OTHER = "stream.other" =>
        "the agent ended {feature} with error code {code}{detail}; the SDK does not retry this failure";

    END_EXITED = "end.exited" =>
        "command {program} exited with code {exit_code}; its stdout and stderr are in the error";
    END_SIGNALED = "end.signaled" =>
        "command {program} was killed by signal {signal} (exit code {exit_code}); its stdout and stderr are in the error";
    END_MEMORY_LIMIT = "end.memory_limit" =>
        "command {program} was killed by signal {signal} at the sandbox's memory limit (exit code {exit_code}); use less memory or give the sandbox a higher limit; its stdout and stderr are in the error";
    END_CPU_LIMIT = "end.cpu_limit" =>
        "command {program} was killed by signal {signal} at its CPU time limit (exit code {exit_code}); give the sandbox a higher cpu_time_limit or do less work per command; its stdout and stderr are in the error";
    END_UNKNOWN_STATUS = "end.unknown_status" =>
        "command {program} ended with status {status} and exit code {exit_code}; its stdout and stderr are in the error";
    END_TIMEOUT = "end.timeout" =>
        "command {program} reached its timeout and was stopped; raise the command timeout, or pass 0 for no limit";
    END_OUTPUT_TRUNCATED = "end.output_truncated" =>
        "the agent stopped sending the output of {program} because it was not read fast enough; the process keeps running, reconnect to it to read on";

    TIMEOUT_REQUEST = "timeout.request" =>
        "the call {feature} did not finish{within}; raise request_timeout or retry";
    TIMEOUT_EXECUTION = "timeout.execution" =>
        "the code cell did not finish{within}; raise its timeout or split the work";
    TIMEOUT_STATE_WAIT = "timeout.state_wait" =>
        "the sandbox did not finish {feature}{within}; check its state, then retry";

    SDK_INVALID_ARGUMENT = "sdk.invalid_argument" =>
        "invalid {argument}: {reason}";
    SDK_CLOSED = "sdk.closed" =>
        "the sandbox handle is closed; create a new sandbox or connect to it again";
    SDK_CANCELLED = "sdk.cancelled" =>
        "the call {feature} was cancelled by the caller; start it again if still needed";
    SDK_PROTOCOL_VIOLATION = "sdk.protocol_violation" =>
        "the agent broke the protocol during {feature}: {what}; the call was abandoned, report this with the image version";
    SDK_INTERNAL = "sdk.internal" =>
        "internal error in {feature}: {what}; please report this";
    SDK_AGENT_VM_LOST = "sdk.agent_vm_lost" =>
        "the MicroVM behind the sandbox disappeared during {feature}; create a new sandbox";
    SDK_KERNEL_FAILED = "sdk.kernel_failed" =>
        "the code kernel of the sandbox could not start: {reason}; check the image and the envs given to the builder (a PATH override can hide the interpreter)";
    SDK_NOT_READY = "sdk.not_ready" =>
        "the sandbox was not ready within {waited} (state {state}){detail}; raise ready_timeout or check the image";
    SDK_LIFETIME = "sdk.lifetime" =>
        "sandbox {setting} of {requested} is above the platform cap of {cap}; pass a smaller {setting}";
    SDK_SANDBOX_NOT_FOUND = "sdk.sandbox_not_found" =>
        "the sandbox {sandbox_id} does not exist or has terminated; create a new sandbox";
    SDK_SANDBOX_STATE = "sdk.sandbox_state" =>
        "the sandbox is {state}; {remedy}";
    SDK_LIFETIME_REACHED = "sdk.lifetime_reached" =>
        "the sandbox {sandbox_id} reached its maximum duration and was terminated; create a new sandbox, with a longer timeout if needed";
    SDK_RECONNECT_GAVE_UP = "sdk.reconnect_gave_up" =>
        "lost the connection to the sandbox during {feature} and it did not come back within {waited} ({attempts} health probes); retry later, or check that the sandbox is still running";
    SDK_UNIMPLEMENTED = "sdk.unimplemented" =>
        "feature {feature} is not available: {reason}{see}";
    SDK_LIFECYCLE_UNSUPPORTED = "sdk.lifecycle_unsupported" =>
        "this sandbox cannot {feature}: {reason}";
    SDK_LIFECYCLE_UNMANAGED_REASON = "sdk.lifecycle_unmanaged_reason" =>
        "it was created without a managed lifecycle; create it with Sandbox::builder().max_lifetime(..) or .on_timeout(..) to make its timeout movable";
    SDK_KILL_FAILED = "sdk.kill_failed" =>
        "kill of sandbox {sandbox_id} failed and its MicroVM may still be running: {cause}; this handle stays usable, call kill again";
    SDK_KEPT_ON_FAILURE = "sdk.kept_on_failure" =>
        "{cause}; the sandbox {sandbox_id} was kept running (keep_on_failure): connect to it or kill it by id when done";
    SDK_CELL_EXPIRED = "sdk.cell_expired" =>
        "the run_code cell ran on after the connection was cut, but the agent no longer keeps it, so its output from then on is lost; the cell was not run again, run it again if still needed";
    SDK_CELL_OUTPUT_DROPPED = "sdk.cell_output_dropped" =>
        "the run_code cell ran on after the connection was cut, but the agent already dropped the output it produced meanwhile (more than its 4 MiB log); the cell was not run again, run it again if still needed";

    BUILD_STEP_FAILED = "build.step_failed" =>
        "template build step {step} failed{exit}; fix that step (its command and the end of the build log are in the error)";
    BUILD_FAILED = "build.failed" =>
        "template build failed{detail}; the end of the build log is in the error";
    BUILD_QUOTA = "build.quota" =>
        "too many template builds are running at once (at most {limit}); wait for one to finish, then build again";
    BUILD_REJECTED = "build.rejected" =>
        "the image service refused the template build ({code}); check the build's settings and your permissions, then build again";
    BUILD_READY = "build.ready" =>
        "the built image did not become ready: its ready hook answered HTTP {status}; check the start command and its ready check, then build again";
    BUILD_TIMEOUT = "build.timeout" =>
        "the template build did not settle within {waited}; it goes on in the service, read its status later or wait longer";
    BUILD_BASE_MISSING_ENTRYPOINT = "build.base_image_missing_entrypoint" =>
        "the base image's Dockerfile has no CMD or ENTRYPOINT line to start the agent; use a base image whose Dockerfile ends by starting rayd";
    BUILD_BASE_NOT_S3 = "build.base_image_not_s3" =>
        "the base image's code artifact is not an s3:// location; publish the base image from an S3 artifact";
    BUILD_BASE_MISSING_ARTIFACT = "build.base_image_missing_artifact" =>
        "the base image's code artifact is missing; publish the base image again";
    BUILD_CONTEXT_OUTSIDE = "build.context_path_outside" =>
        "the source of copy step {step} lies outside the build context; copy only paths under the context directory";
    BUILD_CONTEXT_MISSING = "build.context_path_missing" =>
        "the source of copy step {step} does not exist in the build context or .dockerignore excludes it; fix the path or the .dockerignore";

    TEMPLATE_NAME = "template.name" =>
        "invalid template name: {reason}; use 1 to 64 of A-Z, a-z, 0-9, _ and - (no :tag), or an image ARN";
    TEMPLATE_BASE_NO_VERSION = "template.base_no_version" =>
        "the base image has no usable version to build on; publish the base image first, or name a version that built";
    TEMPLATE_NOT_FOUND = "template.not_found" =>
        "no template of that name exists in this account and region; build it first";
    POOL_NOT_STARTED = "pool.not_started" =>
        "the pool is not started; call start() first, or create the sandbox without the pool";
    POOL_CLOSED = "pool.closed" =>
        "the pool is closed; create the sandbox without the pool, or use another pool";
    INDEX_FAILED = "index.failed" =>
        "the sandbox index call {operation} failed: {cause}; {remedy}";
    INDEX_UNPROCESSED = "index.unprocessed" =>
        "the sandbox index left keys unprocessed after {attempts} attempts of {operation}, so the list would be incomplete; list again later";
    INDEX_WRITE_TERMINATED = "index.write_terminated" =>
        "could not write the index row of sandbox {sandbox_id}: {cause}; its MicroVM was terminated, fix the index (docs/sandbox-index.md) and create the sandbox again";
    INDEX_WRITE_KEPT = "index.write_kept" =>
        "could not write the index row of sandbox {sandbox_id}: {cause}; its MicroVM was kept (keep on failure) but indexed lists will not show it, kill it when done";
    INDEX_WRITE_TERMINATE_FAILED = "index.write_terminate_failed" =>
        "could not write the index row of sandbox {sandbox_id}: {cause}; terminating its MicroVM failed too, so it may still be running, kill it by id";
    TEMPLATE_TOO_OLD = "template.too_old" =>
        "the agent in this image is too old for templates (it reports no template_start feature); build the template again on a current base image";
    LOGS_NONE = "logs.none" =>
        "no logs (logging disabled, no execution role, or another group) for sandbox {sandbox_id} in log group {resource}; create the sandbox with SandboxLogging::cloudwatch() and an execution role that may write there, or pass the group it logs to";

    STACK_FAILED = "stack.failed" =>
        "stack {stack} failed: resource {resource} ended {status}; read the stack's events in CloudFormation, fix the cause, then {again}";
    STACK_REFUSED = "stack.refused" =>
        "the CloudFormation call {operation} for stack {stack} was refused ({aws_code}); check your permissions and that no resource of that name exists outside the stack, then {again}";
    STACK_BLOCKED = "stack.blocked" =>
        "stack {stack} is {status} and cannot be updated; delete the stack, then {again}";
    STACK_IN_PROGRESS = "stack.in_progress" =>
        "stack {stack} is still changing ({status}); wait until it settles, then {again}";
    STACK_NOT_FOUND = "stack.not_found" =>
        "stack {stack} does not exist in this account and region; create it with {deploy}";
    STACK_OUTPUT_MISSING = "stack.output_missing" =>
        "stack {stack} has no output {output}; update it with {deploy}";

    PERSISTENCE_PERMISSION_DENIED = "persistence.permission_denied" =>
        "the {operation} was refused access to S3 (permission_denied): the sandbox has no execution role, or the role may not use the prefix; create the sandbox with an execution role that may (docs/persistence.md), then run it again";
    PERSISTENCE_INTERNAL = "persistence.internal" =>
        "the {operation} failed in the sandbox (internal: the network, S3, the archive, a checksum or the disk); run it again, and check the sandbox's free disk if it fails again";
    PERSISTENCE_FAILED_PRECONDITION = "persistence.failed_precondition" =>
        "the {operation} could not start (failed_precondition): another checkpoint or restore is running in this sandbox, or the region is unknown; wait for the other operation or fix the region, then run it again";
    PERSISTENCE_UNIMPLEMENTED = "persistence.unimplemented" =>
        "the agent in this sandbox cannot {operation} (unimplemented); create the sandbox from an image with a newer agent";
    PERSISTENCE_INTERRUPTED = "persistence.interrupted" =>
        "the {operation} was interrupted: {cause}; it is not resumed, run it again";
    PERSISTENCE_RESOURCE_EXHAUSTED = "persistence.resource_exhausted" =>
        "the {operation} ran out of a sandbox resource (resource_exhausted: the disk or the agent's limits); free disk space in the sandbox, then run it again";
    PERSISTENCE_OTHER = "persistence.other" =>
        "the {operation} failed with code {code}; run it again, or report it with the image version";
    PERSISTENCE_NO_CHECKPOINT = "persistence.no_checkpoint" =>
        "there is no checkpoint at the prefix to restore from; checkpoint first (a first life has none)";
    PERSISTENCE_NOT_FOUND = "persistence.not_found" =>
        "the {operation} found nothing to archive (not_found); check the user and its home directory";
    PERSISTENCE_INVALID_ARGUMENT = "persistence.invalid_argument" =>
        "the agent refused an argument of the {operation} (invalid_argument); check the bucket, the prefix, the region, the excludes and the user";
    PERSISTENCE_TIMEOUT = "persistence.timeout" =>
        "the {operation} did not finish{within}; raise its timeout and run it again";
    PERSISTENCE_UNAUTHENTICATED = "persistence.unauthenticated" =>
        "the agent refused the access token for the {operation}; connect to the sandbox again to get a valid token";
    PERSISTENCE_NOT_STARTED = "persistence.not_started" =>
        "the agent did not start the {operation} with a started event; the call was abandoned, report this with the image version";

    TRANSFER_EXPIRED = "transfer.expired" =>
        "{reason}: the {transfer} did not finish before its deadline or its URLs expired; start it again, with a longer expiry if needed";
    TRANSFER_TOO_LARGE = "transfer.too_large" =>
        "{reason}: the object is larger than the {transfer} allows; send a smaller file or allow more bytes (max_bytes)";
    TRANSFER_FILE_SHRANK = "transfer.file_shrank" =>
        "{reason}: the file got smaller while the {transfer} read it; stop writing to it, then start the {transfer} again";
    TRANSFER_CHECKSUM_MISMATCH = "transfer.checksum_mismatch" =>
        "{reason}: the bytes of the {transfer} do not match their sha256; start the {transfer} again";
    TRANSFER_S3_DENIED = "transfer.s3_denied" =>
        "{reason}: S3 refused the sandbox's request for the {transfer}; check that the URLs are unexpired and signed by credentials that may use the bucket";
    TRANSFER_S3_UNAVAILABLE = "transfer.s3_unavailable" =>
        "{reason}: S3 did not answer during the {transfer}; start it again later";
    TRANSFER_DISK_RESERVE = "transfer.disk_reserve" =>
        "{reason}: the {transfer} would use the disk space the sandbox keeps in reserve; free disk space in the sandbox or send a smaller file";
    TRANSFER_DISK_FULL = "transfer.disk_full" =>
        "{reason}: the sandbox's disk filled up during the {transfer}; free disk space in the sandbox, then start it again";
    TRANSFER_CANCELLED = "transfer.cancelled" =>
        "{reason}: the {transfer} was cancelled; start it again if still needed";
    TRANSFER_INVALID_ARGUMENT = "transfer.invalid_argument" =>
        "{reason}: the agent refused an argument of the {transfer}; check the path, the size limit and the URLs' expiry";
    TRANSFER_FILE_NOT_FOUND = "transfer.file_not_found" =>
        "{reason}: the file or object of the {transfer} does not exist; check the path, or upload the object before it expires";
    TRANSFER_OTHER = "transfer.other" =>
        "{reason}: the {transfer} failed (code {code}) for a reason this SDK does not know; start it again, or report it with the image version";
    SECRET_NOT_FOUND = "secret.not_found" =>
        "{subject} found no such secret, or it is scheduled for deletion; check the name and the store's prefix, or create the secret";
    SECRET_ACCESS_DENIED = "secret.access_denied" =>
        "{subject} was refused ({aws_code}); allow the IAM action secretsmanager:{operation} to the caller, and kms:Decrypt on the key of a secret encrypted with a customer managed key";
    SECRET_EXISTS = "secret.exists" =>
        "{subject} found a secret of that name already; update it, or destroy it first";
    SECRET_VERSION_CONFLICT = "secret.version_conflict" =>
        "{subject} found the new version already written by another writer; read the secret's info and update again";
    SECRET_LIMIT = "secret.limit_exceeded" =>
        "{subject} hit a Secrets Manager limit ({aws_code}); write a secret at most once every 10 minutes, or delete secrets you no longer use";
    SECRET_OTHER = "secret.other" =>
        "{subject} failed ({aws_code}); check the request, and report it if it persists";
    SECRET_DELETION_PENDING = "secret.deletion_pending" =>
        "a secret of that name was still being deleted after {waited} of retries; wait a minute and create it again, or choose another name";
    SECRET_NOT_STRING = "secret.not_string" =>
        "{subject} returned a binary secret, not a string; store the value as a string (SecretString) to read or inject it";

    GIT_AUTH = "git.auth" =>
        "git {action} needs credentials: the remote asked for them or refused them; pass a username and a password or token";
    GIT_AUTH_PASSWORD = "git.auth_password" =>
        "git {action} needs a password or token: the username alone was refused; pass the password or token too";
    GIT_AUTH_REWRITE = "git.auth_rewrite" =>
        "git {action} did not send the credentials: the sandbox's git configuration rewrites URLs (url.*.insteadOf or pushInsteadOf), so they could reach another server; remove the rewriting, then retry";
    GIT_AUTH_TRANSPORT = "git.auth_transport" =>
        "git {action} did not send the credentials: the sandbox's git configuration sets a proxy, TLS, header or transport setting (http.*proxy*, http.*ssl*, http.*curloptResolve, http.*extraHeader, remote.*.proxy* or remote.*.vcs), so they could reach another server or travel unchecked; remove the setting, then retry";
    GIT_AUTH_MOVED = "git.auth_moved" =>
        "git {action} did not send the credentials: the remote's URL in the sandbox (url or pushurl) is not the URL they are for; set it back, or pass the URL the credentials are for";
    GIT_UPSTREAM = "git.upstream" =>
        "git {action} found no upstream branch; pass a remote and a branch, or set the upstream (push with set_upstream, or git branch --set-upstream-to)";

    CONFIGURE_INVALID = "configure.invalid" =>
        "{feature}: {cause}; the agent refused the section's settings and applied nothing of it, fix them and apply the section again";
    CONFIGURE_FAILED = "configure.failed" =>
        "{feature}: {cause}; the agent could not apply the section, apply it again or check the sandbox";
    CONFIGURE_NO_FEATURES_REASON = "configure.no_features_reason" =>
        "the agent in this image reports no optional features (needs ConfigureSandbox); publish an image with a newer agent";
    CONFIGURE_SECTION_OFF_REASON = "configure.section_off_reason" =>
        "the agent in this sandbox does not offer this section (its feature flag in Health is false); use an image whose agent supports it";
    CONFIGURE_UNSUPPORTED_REASON = "configure.unsupported_reason" =>
        "the agent in this sandbox answered that it does not support this section (UNSUPPORTED); use an image whose agent supports it";

    MOUNT_PATH_TOO_MANY = "mount_path.too_many" =>
        "the sandbox asks for {count} mount paths (S3 mounts and EFS volumes together); pass at most 4";
    MOUNT_PATH_TOO_LONG = "mount_path.too_long" =>
        "a mount path is longer than 1,024 bytes or has a component longer than 255; pass a shorter path";
    MOUNT_PATH_CONTROL = "mount_path.control" =>
        "a mount path holds a control character; pass a path without one";
    MOUNT_PATH_RELATIVE = "mount_path.relative" =>
        "the mount path {path} is not absolute; pass a path under /mnt/ or /home/user/";
    MOUNT_PATH_CANONICAL = "mount_path.canonical" =>
        "the mount path {path} is not canonical (it has a '.' or '..' segment, a '//' or a trailing '/'); pass it in canonical form";
    MOUNT_PATH_ROOT = "mount_path.root" =>
        "the mount path {path} is not strictly under /mnt/ or /home/user/; pass a path below one of them";
    MOUNT_PATH_OVERLAP = "mount_path.overlap" =>
        "the mount paths {other} and {path} overlap (the same path, or one inside the other); pass paths apart";

    MOUNT_BUCKET_EMPTY = "mount.bucket_empty" =>
        "the S3 mount at {path} has an empty bucket; pass the bucket's name";
    MOUNT_BUCKET_NAME = "mount.bucket_name" =>
        "the S3 mount at {path} has a bucket that is not an S3 bucket name (3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter or a digit, no '..', not an IP address); pass the bucket's name";
    MOUNT_PREFIX_ABSOLUTE = "mount.prefix_absolute" =>
        "the S3 mount at {path} has a prefix starting with '/'; pass it relative to the bucket (team/data/, not /team/data/)";
    MOUNT_PREFIX_BAD = "mount.prefix_bad" =>
        "the S3 mount at {path} has a prefix of 1,024 bytes or more, with an empty, '.' or '..' segment, or holding a control character; pass an S3 key prefix such as team/data/";
    MOUNT_WRITE_FLAGS = "mount.write_flags" =>
        "the S3 mount at {path} allows overwrite or delete but is read-only; pass read_only(false) with them, or drop them";
    MOUNT_POOLED = "mount.pooled" =>
        "a pool's warm sandboxes never carry S3 mounts; drop them from the pool's builder and create the sandbox with them instead";
    MOUNT_CONNECT = "mount.connect" =>
        "connect mounts nothing (it reads the sandbox's own mounts from its agent); drop mount() from the builder, or create a new sandbox";
    MOUNT_VARIANT_REASON = "mount.variant_reason" =>
        "mounting S3 needs an image of the base-caps variant (rayito-base-caps or rayito-base-caps-efs, or a sized form such as rayito-base-caps-2gb); the image asked for is of the variant {variant}";
    MOUNT_OFF_REASON = "mount.off_reason" =>
        "the agent in this sandbox does not offer S3 mounts (Health's s3_mounts flag is false: an agent older than S3 mounts, or a host or image variant without FUSE); use an image of the base-caps variant";
    MOUNT_UNSUPPORTED_REASON = "mount.unsupported_reason" =>
        "the agent in this sandbox answered that it cannot mount S3 (UNSUPPORTED); use an image of the base-caps variant with a newer agent";
    MOUNT_REFUSED = "mount.refused" =>
        "mounts: the agent refused the s3_mounts section ({status}, {code}); {remedy}";
    MOUNT_FAILED = "mount.failed" =>
        "mounts: {path} could not be mounted ({code}); {remedy}";
    MOUNT_UNSETTLED = "mount.unsettled" =>
        "mounts: {path} was still not mounted after {waited} (timeout); {remedy}";
    MOUNT_REMEDY_NETWORK = "mount.remedy_network" =>
        "check that the sandbox reaches S3 (its egress policy, the bucket's region)";
    MOUNT_REMEDY_IAM_DENIED = "mount.remedy_iam_denied" =>
        "give the sandbox an execution role with the s3-mounts policy for this bucket and prefix (docs/mounts.md, IAM)";
    MOUNT_REMEDY_NOT_FOUND = "mount.remedy_not_found" =>
        "check that the bucket exists in the sandbox's region and that its execution role may list it";
    MOUNT_REMEDY_NOT_ALLOWED = "mount.remedy_not_allowed" =>
        "the bucket is not in the image's allowlist (RAYITO_ALLOWED_MOUNT_BUCKETS; empty or absent denies every bucket): publish the image with --env RAYITO_ALLOWED_MOUNT_BUCKETS=<bucket>, or set it in the template's environment";
    MOUNT_REMEDY_INVALID_PATH = "mount.remedy_invalid_path" =>
        "pass a path the agent accepts: canonical, strictly under /mnt/ or /home/user/, with no symbolic link on the way";
    MOUNT_REMEDY_HELPER_MISSING = "mount.remedy_helper_missing" =>
        "use an image of the base-caps variant, which ships the mount helper and FUSE";
    MOUNT_REMEDY_TIMEOUT = "mount.remedy_timeout" =>
        "create the sandbox again, or check that it reaches S3 quickly (its egress policy, the bucket's region)";
    MOUNT_REMEDY_UNKNOWN = "mount.remedy_unknown" =>
        "the agent reported a class this SDK does not know; see docs/mounts.md";

    NETWORK_TOO_MANY = "network.too_many" =>
        "{list} has more than 256 entries; pass at most 256";
    NETWORK_ENTRY_EMPTY = "network.entry_empty" =>
        "entry {index} of {list} is empty; pass an IP address, a CIDR or a hostname";
    NETWORK_ENTRY_BAD = "network.entry_bad" =>
        "entry {index} of {list} is not an IP address, a CIDR or a hostname; pass one of those (a hostname may start with *. and end with .)";
    NETWORK_HOSTNAME_TOO_LONG = "network.hostname_too_long" =>
        "entry {index} of {list} is a hostname longer than 253 characters; pass a shorter hostname";
    NETWORK_HOSTNAME_IN_DENY = "network.hostname_in_deny" =>
        "entry {index} of deny_out is a hostname, and deny_out takes only IP addresses and CIDRs; deny 0.0.0.0/0 and allow the hostnames you need instead";
    NETWORK_TOO_MANY_HOSTNAMES = "network.too_many_hostnames" =>
        "the policy has more than 64 hostname entries; pass at most 64, or use *. wildcards";
    NETWORK_PROXY_ADDRESS = "network.proxy_address" =>
        "the egress proxy address is empty or not host:port; pass host:port or [v6]:port";
    NETWORK_PROXY_PASSWORD_ALONE = "network.proxy_password_alone" =>
        "the egress proxy has a password but no username; pass both or neither";
    NETWORK_PROXY_CREDENTIAL = "network.proxy_credential" =>
        "the egress proxy {field} must be 1 to 255 bytes (RFC 1929); pass a {field} of that length";
    NETWORK_NOT_ENFORCED_REASON = "network.not_enforced_reason" =>
        "the sandbox's agent does not enforce egress policies, so the sandbox was terminated (even with keep-on-failure); create it where the agent enforces them (the local backend as root)";
    NETWORK_LOST_REASON = "network.lost_reason" =>
        "the sandbox's agent stopped enforcing the egress policy after UpdateNetwork, so the sandbox was terminated; create it again where the agent enforces egress policies";
    NETWORK_PRECONDITION_REASON = "network.precondition_reason" =>
        "the sandbox's agent cannot apply an egress policy to this sandbox (it was created without a restricting policy, or its image lacks CAP_NET_ADMIN); create the sandbox with a network policy";

    GATEWAY_TOO_MANY = "gateway.too_many" =>
        "the sandbox has {count} gateways; pass at most 8";
    GATEWAY_NAME = "gateway.name" =>
        "gateway {index} has a name that is empty, longer than 64 characters or holds a character outside a-z, 0-9 and '-'; pass a name of 1 to 64 of those";
    GATEWAY_POOLED = "gateway.pooled" =>
        "a pool's warm sandboxes never carry gateways; drop them from the pool's builder and pass them to Pool::take_with_gateways";
    GATEWAY_CONNECT = "gateway.connect" =>
        "connect applies no gateway (it recovers the sandbox's own from its agent); drop gateway() from the builder, or create a new sandbox";
    GATEWAY_UPSTREAM_SCHEME = "gateway.upstream_scheme" =>
        "the upstream of gateway {gateway} does not start with https://; pass https://host or https://host:port, without a path or a query";
    GATEWAY_UPSTREAM_REST = "gateway.upstream_rest" =>
        "the upstream of gateway {gateway} has no host, or has a path, a query, userinfo or a fragment; pass only https:// and the host, with an optional :port";
    GATEWAY_HEADER_COUNT = "gateway.header_count" =>
        "gateway {gateway} has {count} headers; pass 1 to 16";
    GATEWAY_HEADER_NAME = "gateway.header_name" =>
        "header {index} of gateway {gateway} has a name that is not an HTTP token (RFC 9110: letters, digits and 15 symbols); pass a valid header name";
    GATEWAY_HEADER_RESERVED = "gateway.header_reserved" =>
        "gateway {gateway} may not inject the reserved header {header} (host, content-length, transfer-encoding, connection, keep-alive, proxy-authenticate, proxy-authorization, te, trailers, trailer, upgrade); drop it";
    GATEWAY_HEADER_TWICE = "gateway.header_twice" =>
        "gateway {gateway} has two headers that differ only in case ({header}); pass each header once";
    GATEWAY_ALLOW_EMPTY = "gateway.allow_empty" =>
        "gateway {gateway} has no allow rule, so it would never forward a request; pass 1 to 32 (method, path) rules";
    GATEWAY_ALLOW_TOO_MANY = "gateway.allow_too_many" =>
        "gateway {gateway} has {count} allow rules; pass at most 32";
    GATEWAY_METHOD = "gateway.method" =>
        "allow rule {index} of gateway {gateway} has a method outside DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT; pass one of those, in upper case";
    GATEWAY_PATH_RELATIVE = "gateway.path_relative" =>
        "allow rule {index} of gateway {gateway} has a path that does not start with '/'; pass an absolute path";
    GATEWAY_PATH_UNSAFE = "gateway.path_unsafe" =>
        "allow rule {index} of gateway {gateway} has a path the agent would refuse in every request: only RFC 3986 characters but ';', no '.' or '..' segment, no empty one before the last, no malformed escape and no encoded '/', '\\', '%', ';' or control character; pass a plain path (ending with /* for a prefix)";
    GATEWAY_RATE = "gateway.rate" =>
        "the rate_per_minute of gateway {gateway} is {rate}; pass 0 (the agent's default, 600 a minute) or 1 to 6,000";

    TELEMETRY_INTERVAL = "telemetry.interval" =>
        "the telemetry export's interval is {interval}; pass 15 to 300 whole seconds";
    TELEMETRY_SERVICE_NAME = "telemetry.service_name" =>
        "the telemetry export's service_name is empty or longer than 1,024 bytes; pass a name (the default is rayito)";
    TELEMETRY_NAMES = "telemetry.names" =>
        "the telemetry export's names {names} is not recognized; use rayito or e2b";
    TELEMETRY_BEARER_NAME = "telemetry.bearer_name" =>
        "the secret name of OtlpAuth::bearer is empty; pass the name of the secret that holds the token";
    TELEMETRY_ENDPOINT = "telemetry.endpoint" =>
        "the telemetry export's endpoint is not an https:// URL with a host (http:// only to a loopback host), or it has userinfo or a fragment; pass the collector's OTLP/HTTP metrics URL, such as https://collector.example.com:4318/v1/metrics";
    TELEMETRY_POOLED = "telemetry.pooled" =>
        "a pool's warm sandboxes never carry a telemetry export; drop telemetry() from the pool's builder";
    TELEMETRY_CONNECT = "telemetry.connect" =>
        "connect applies no telemetry export (the sandbox's own keeps running in its agent: read it with telemetry_status); drop telemetry() from the builder";
    TELEMETRY_VARIANT_REASON = "telemetry.variant_reason" =>
        "the execution role's SigV4 (OtlpAuth::execution_role) needs an image of the base-caps variant (rayito-base-caps or rayito-base-caps-efs, or a sized form); the image asked for is of the variant {variant}; use OtlpAuth::bearer on other images";
    TELEMETRY_NO_FEATURES_REASON = "telemetry.no_features_reason" =>
        "needs an image whose agent serves Configure (rayd 0.6.0 or later)";
    TELEMETRY_OFF_REASON = "telemetry.off_reason" =>
        "the agent of this image cannot export telemetry: it is older than rayd 0.6.0, or it knows no AWS region for CloudWatch's endpoint (the local backend never does: pass TelemetryExport::endpoint); use an image published with rayd 0.6.0 or later, or an explicit endpoint";

    VOLUME_TOO_MANY = "volume.too_many" =>
        "the sandbox has {count} volumes; pass at most 4";
    VOLUME_FILE_SYSTEM_ID = "volume.file_system_id" =>
        "the volume at {path} has a file_system_id that is not fs- and 8 to 40 lowercase hex digits; pass the file system's id";
    VOLUME_ACCESS_POINT_ID = "volume.access_point_id" =>
        "the volume at {path} has an access_point_id that is not fsap- and 8 to 40 lowercase hex digits; pass the access point's id";
    VOLUME_NAME = "volume.name" =>
        "the volume at {path} has a name that is empty, longer than 100 characters or holds a character outside A-Z, a-z, 0-9 and '-'; pass a name of 1 to 100 of those";
    VOLUME_REGION = "volume.region" =>
        "the volume at {path} has a region that is not a region name; pass one such as us-east-1, or none for the client's";
    VOLUME_VARIANT_REASON = "volume.variant_reason" =>
        "volumes need an image of the variant base-caps-efs (or a size of it), and the image asked for is of the variant {variant}";
    VOLUME_EGRESS_MISSING = "volume.egress_missing" =>
        "volumes need egress with the one connector of your VPC that reaches the mount targets (the efs-volumes stack's ConnectorArn): without it the sandbox takes the image's INTERNET_EGRESS and never reaches a mount target; pass that connector, and for internet access leave through your VPC (a NAT or transit gateway in the connector's subnets)";
    VOLUME_EGRESS_INTERNET = "volume.egress_internet" =>
        "volumes do not combine with INTERNET_EGRESS: a MicroVM takes one egress connector, and the volumes need your VPC's; pass only that connector, and for internet access leave through your VPC (a NAT or transit gateway in the connector's subnets)";
    VOLUME_EGRESS_MANY = "volume.egress_many" =>
        "volumes take one egress connector (a MicroVM accepts only one), and {count} were given; pass only your VPC's connector (the efs-volumes stack's ConnectorArn)";
    VOLUME_ROLE = "volume.role" =>
        "volumes need an execution role: amazon-efs-utils signs the mount's TLS tunnel with its credentials (which need the efs-volumes stack's CallerPolicyArn policy); pass execution_role_arn";
    VOLUME_POOLED = "volume.pooled" =>
        "a pool's warm sandboxes never carry volumes; drop volume() from the pool's builder and create a sandbox with volumes with Sandbox::builder()";
    VOLUME_CONNECT = "volume.connect" =>
        "connect mounts no volume (it reads the sandbox's own from its agent); drop volume() from the builder, or create a new sandbox";
    VOLUME_NO_AWS = "volume.no_aws" =>
        "volumes: this client has no AWS configuration to look up a mount target with; pass each volume's mount_target_ip, or use a client with an AWS configuration";
    VOLUME_NO_MOUNT_TARGET = "volume.no_mount_target" =>
        "volumes: the file system has no available mount target; deploy the efs-volumes stack, or wait until its mount targets are available";
    VOLUME_LOOKUP_DENIED = "volume.lookup_denied" =>
        "volumes: no IAM permission elasticfilesystem:DescribeMountTargets on the file system (the caller's credentials); grant it, or pass each volume's mount_target_ip";
    VOLUME_LOOKUP_NOT_FOUND = "volume.lookup_not_found" =>
        "volumes: no such file system in the region looked in; check the file system's id and region";
    VOLUME_IMAGE_REASON = "volume.image_reason" =>
        "this image has no amazon-efs-utils (or does not run with additionalOsCapabilities ALL); publish the optional image rayito-base-caps-efs with `rayito image publish --with-efs --os-capabilities ALL` and create the sandbox from it";
    VOLUME_MOUNT_REFUSED = "volume.mount_refused" =>
        "volumes: the volumes could not be mounted ({code}); see docs/volumes.md for what the code means";
    VOLUME_MOUNT_FAILED = "volume.mount_failed" =>
        "volumes: {path} could not be mounted ({code}); see docs/volumes.md for what the code means";
    VOLUME_MOUNT_TIMEOUT = "volume.mount_timeout" =>
        "volumes: a volume was still not mounted after {limit} (timeout); check the network path to the mount target, then create the sandbox again";
    VOLUME_STORE_FILE_SYSTEM_ID = "volume.store_file_system_id" =>
        "the file system id is not 'fs-' and 8 to 40 lower-case hex digits; pass the id of an EFS file system (the efs-volumes stack's FileSystemId output)";
    VOLUME_STORE_NAME = "volume.store_name" =>
        "a volume name is 1 to 100 of A-Z, a-z, 0-9 and '-'; pass such a name";
    VOLUME_STORE_NOT_FOUND = "volume.store_not_found" =>
        "no volume named {name} on this file system; create it with VolumeStore::create";
    VOLUME_STORE_GONE = "volume.store_gone" =>
        "the access point or the file system does not exist";
    VOLUME_STORE_DENIED = "volume.store_denied" =>
        "no IAM permission {action} on the file system (the caller's credentials); grant it to the caller";
    VOLUME_STORE_EXISTS = "volume.store_exists" =>
        "an access point with that name already exists";
    VOLUME_STORE_LIMIT = "volume.store_limit" =>
        "the file system has reached its limit of access points; destroy a volume first";
    VOLUME_STORE_STATE = "volume.store_state" =>
        "the file system is not in the 'available' state; retry once it is";
    VOLUME_STORE_IN_USE = "volume.store_in_use" =>
        "the file system still has mount targets; retry once they are deleted";
    VOLUME_STORE_FAILED = "volume.store_failed" =>
        "the EFS call {action} failed ({code})";
    VOLUME_NETWORK_VPC_ID = "volume.network_vpc_id" =>
        "the VPC id is not 'vpc-' and 8 to 17 lower-case hex digits; pass an existing VPC's id";
    VOLUME_NETWORK_SUBNET_COUNT = "volume.network_subnet_count" =>
        "{count} subnets given; pass 1 to 3 (one per availability zone: one mount target each)";
    VOLUME_NETWORK_SUBNET_ID = "volume.network_subnet_id" =>
        "subnet {index} is not 'subnet-' and 8 to 17 lower-case hex digits; pass an existing subnet's id";
    VOLUME_NETWORK_SUBNET_TWICE = "volume.network_subnet_twice" =>
        "subnet {index} is given twice; pass each subnet once";
    VOLUME_NETWORK_FAILED = "volume.network_failed" =>
        "the VPC cannot hold efs-volumes (nothing was created): {reasons}";
    VOLUME_STACK_ARN = "volume.stack_arn" =>
        "value {index} is not the ARN of an EFS access point (arn:aws:elasticfilesystem:<region>:<account>:access-point/fsap-...); pass such ARNs";
    VOLUME_STACK_CONNECTOR_NAME = "volume.stack_connector_name" =>
        "a connector name is 1 to 64 of A-Z, a-z, 0-9, '_' and '-'; pass such a name";
    VOLUME_STACK_DESTROY_NO_WAIT = "volume.stack_destroy_no_wait" =>
        "deleting the file system needs the wait: it can go only once the stack has deleted its mount targets; pass wait = true";
    VOLUME_STACK_MISSING = "volume.stack_missing" =>
        "the stack {stack} does not exist or has no FileSystemId output; deploy it with EfsVolumes::deploy";
    VOLUME_STACK_FOREIGN = "volume.stack_foreign" =>
        "that file system does not carry the efs-volumes tag (rayito=efs-volumes), so it is not deleted";
    VOLUME_STACK_DRAIN = "volume.stack_drain" =>
        "the file system still has mount targets 120 s after the stack's deletion; retry the deletion in a few minutes";

    EVENTS_URL = "events.url" =>
        "register_webhook: url must be a valid https:// URL to a public address: a DNS host (not localhost) or a public IP (not loopback, private, link-local or metadata), port between 1 and 65535";
    EVENTS_URL_LOCAL = "events.url_local" =>
        "register_webhook: url must be an http:// or https:// URL with a host and a port between 1 and 65535 (the local backend also delivers to loopback and plain http)";
    EVENTS_TYPES_EMPTY = "events.types_empty" =>
        "register_webhook: types may not be empty; pass one or more of sandbox.lifecycle.created, paused, resumed, killed";
    EVENTS_TYPE_UNKNOWN = "events.type_unknown" =>
        "unknown event type {type}; pass sandbox.lifecycle.created, sandbox.lifecycle.paused, sandbox.lifecycle.resumed or sandbox.lifecycle.killed";
    EVENTS_SECRET_NAME = "events.secret_name" =>
        "register_webhook: secret_name is empty or longer than 512 characters; pass the name of the webhook's secret (under rayito/webhooks/) or its ARN";
    EVENTS_WEBHOOK_ID = "events.webhook_id" =>
        "delete_webhook: a webhook id is 16 lower-case hex characters; pass an id that list_webhooks shows";
    EVENTS_LIMIT = "events.limit" =>
        "get_events: limit is {limit}; pass 1 to 100";
    EVENTS_RECONCILER = "events.reconciler" =>
        "deploy: reconciler_interval_minutes is {minutes}; pass 2 to 60 (EventBridge Scheduler's rate(N minutes), at least every hour)";
    EVENTS_DEPLOY_ARGUMENT = "events.deploy_argument" =>
        "deploy: {argument} is empty; pass the {what}";
    EVENTS_NOT_DEPLOYED = "events.not_deployed" =>
        "the stack {stack} is not deployed; call deploy() first (rayito events deploy)";
    EVENTS_AWS = "events.aws" =>
        "lifecycle events {operation}: AWS answered {aws_code}; check the caller's IAM policy (the stack's Events*Policy outputs)";
    EVENTS_LOCAL = "events.local" =>
        "lifecycle events {operation}: the local events API answered HTTP {status}{detail}";
    EVENTS_LOCAL_UNREACHABLE = "events.local_unreachable" =>
        "lifecycle events {operation}: the local events API did not answer ({why}); check that the local backend is running";
    EVENTS_STACK_KEY = "events.stack_key" =>
        "the stack key secret of {stack} holds no key; destroy and deploy the stack again";
    EVENTS_LOGGING = "events.logging" =>
        "events need the sandbox to log to CloudWatch (SandboxLogging::cloudwatch() or cloudwatch_group(..)): the forwarder reads the event lines from the sandbox's logs; pass logging(...)";
    EVENTS_BACKEND = "events.backend" =>
        "the LifecycleEvents passed to events() is bound to the {events} backend and this sandbox is created on the {sandbox} backend; pass the events of the sandbox's client (client.events())";
    EVENTS_POOLED = "events.pooled" =>
        "a pool's warm sandboxes never carry events (the section needs the sandbox's own id at create); drop events() from the pool's builder and create those sandboxes with Sandbox::builder()";
    EVENTS_CONNECT = "events.connect" =>
        "connect sends no events section (the sandbox keeps the one it was created with); drop events() from the builder, or create a new sandbox";
    EVENTS_DEAD_LETTERS_AWS = "events.dead_letters_aws" =>
        "on AWS the deliverer's failures go to the stack's SQS queue DelivererFailuresQueue (its DelivererFailuresQueueUrl output): read that queue";

    AGENT_MODEL_ERROR = "agent.model_error" =>
        "the model returned an error";
    AGENT_RUNTIME_ERROR = "agent.runtime_error" =>
        "the agent's runtime ended with an error";
    AGENT_RUNTIME_MISSING = "agent.runtime_missing" =>
        "the agent's runtime is not in the image";
    AGENT_RUNTIME_VERSION_MISMATCH = "agent.runtime_version_mismatch" =>
        "the image's runtime version is not the one asked for";
    AGENT_PROTOCOL_ERROR = "agent.protocol_error" =>
        "the agent's runtime wrote output outside the protocol";
    AGENT_TIMEOUT = "agent.timeout" =>
        "the agent went past its time limit";
    AGENT_MAX_STEPS = "agent.max_steps" =>
        "the agent went past its maximum number of steps";
    AGENT_TOKEN_BUDGET = "agent.token_budget" =>
        "the agent went past its token budget";
    AGENT_OUTPUT_LIMIT = "agent.output_limit" =>
        "the agent went past its maximum output bytes";
    AGENT_ABORTED = "agent.aborted" =>
        "the agent run was aborted";
    AGENT_BUSY = "agent.busy" =>
        "another agent run is already in progress in this sandbox";
}

impl Template {
    /// Fills the template. Values are inserted verbatim in one pass, so a
    /// value that itself contains `{name}` is never expanded again.
    /// A placeholder without a value stays as written (a test checks every
    /// constructor supplies all of its placeholders).
    pub(crate) fn render(&self, args: &[(&str, &str)]) -> String {
        let text = self.text;
        let mut out = String::with_capacity(text.len() + 64);
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match after.find('}') {
                Some(close) => {
                    let name = &after[..close];
                    match args.iter().find(|(k, _)| *k == name) {
                        Some((_, value)) => out.push_str(value),
                        None => {
                            out.push('{');
                            out.push_str(name);
                            out.push('}');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    out.push_str(&rest[open..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// The placeholder names of the template, in order.
    #[cfg(test)]
    pub(crate) fn placeholders(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        let mut rest = self.text;
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let close = after.find('}').unwrap_or(after.len());
            names.push(&after[..close]);
            rest = &after[(close + 1).min(after.len())..];
        }
        names
    }
}

/// `12345678` -> `12,345,678` (en-US grouping).
pub(crate) fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A signed number with en-US grouping.
pub(crate) fn group_i64(n: i64) -> String {
    if n < 0 {
        format!("-{}", group(n.unsigned_abs()))
    } else {
        group(n.unsigned_abs())
    }
}

/// A duration for a message: whole seconds as `28,800 s`, anything else as
/// milliseconds rounded up (`1,500 ms`), so a short non-zero wait never
/// reads as `0`.
pub(crate) fn duration(d: std::time::Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", group(d.as_secs()))
    } else {
        let millis = d.as_nanos().div_ceil(1_000_000);
        format!("{} ms", group(u64::try_from(millis).unwrap_or(u64::MAX)))
    }
}

/// The `{detail}` fragment: `: <text>` or nothing.
pub(crate) fn detail(text: Option<&str>) -> String {
    match text {
        Some(t) if !t.trim().is_empty() => format!(": {}", t.trim()),
        _ => String::new(),
    }
}

/// The `{within}` fragment: ` within <duration>` or nothing.
pub(crate) fn within(after: Option<std::time::Duration>) -> String {
    after.map_or_else(String::new, |d| format!(" within {}", duration(d)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn groups_numbers_for_en_us() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_000), "1,000");
        assert_eq!(group(28_800), "28,800");
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(group_i64(-1_234), "-1,234");
    }

    #[test]
    fn formats_durations() {
        assert_eq!(duration(Duration::from_secs(28_800)), "28,800 s");
        assert_eq!(duration(Duration::from_millis(1_500)), "1,500 ms");
        assert_eq!(duration(Duration::from_nanos(1)), "1 ms");
        assert_eq!(within(None), "");
        assert_eq!(within(Some(Duration::from_secs(90))), " within 90 s");
    }

    #[test]
    fn render_is_single_pass() {
        let t = Template {
            id: "t",
            text: "a {x} b {y}",
        };
        assert_eq!(t.render(&[("x", "{y}"), ("y", "2")]), "a {y} b 2");
        assert_eq!(t.render(&[]), "a {x} b {y}");
    }

    #[test]
    fn templates_follow_the_message_rules() {
        let mut ids = std::collections::HashSet::new();
        for t in ALL {
            assert!(ids.insert(t.id), "duplicate id {}", t.id);
            let first = t.text.chars().next().unwrap_or(' ');
            assert!(
                !first.is_uppercase(),
                "{} must start lower-case: {}",
                t.id,
                t.text
            );
            assert!(!t.text.ends_with('.'), "{} ends with a period", t.id);
            assert!(!t.text.contains('|'), "{} would break the docs table", t.id);
        }
    }
}
