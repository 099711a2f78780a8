//! Secrets Manager error codes a moto server cannot produce, through aws-smithy-mocks.
