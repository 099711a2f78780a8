//! Table tests of the volumes' checks and messages.
