// SPDX-License-Identifier: Apache-2.0
//
// Error: a status code and the message that explains it.

use hwyattn_sys as sys;
use std::ffi::CStr;
use std::fmt;

/// Why a call failed: the C ABI's `hwyattn_status` values other than OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// `HWYATTN_INVALID_ARGUMENT`: a wrong request (shape, stride, value, a
    /// slice too short for its shape).
    InvalidArgument,
    /// `HWYATTN_UNSUPPORTED`: a meaningful request this version cannot do.
    Unsupported,
    /// `HWYATTN_OUT_OF_MEMORY`: scratch or packed buffers could not be allocated.
    OutOfMemory,
    /// `HWYATTN_INTERNAL_ERROR`: a bug in hwyattn; please report the message.
    InternalError,
    /// A status a later library added.
    Other(u32),
}

impl Status {
    fn from_code(code: sys::hwyattn_status) -> Status {
        match code {
            sys::HWYATTN_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::HWYATTN_UNSUPPORTED => Status::Unsupported,
            sys::HWYATTN_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::HWYATTN_INTERNAL_ERROR => Status::InternalError,
            other => Status::Other(other),
        }
    }

    /// The C ABI's numeric value of this status.
    pub fn code(self) -> u32 {
        match self {
            Status::InvalidArgument => sys::HWYATTN_INVALID_ARGUMENT,
            Status::Unsupported => sys::HWYATTN_UNSUPPORTED,
            Status::OutOfMemory => sys::HWYATTN_OUT_OF_MEMORY,
            Status::InternalError => sys::HWYATTN_INTERNAL_ERROR,
            Status::Other(c) => c,
        }
    }
}

/// A failed call: its status and a message naming the argument and the value,
/// either `hwyattn_last_error()` (copied right after the failing call) or,
/// for what this crate checks before calling C (slice lengths, a zero scale),
/// the crate's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

/// `std::result::Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The status of the failure.
    pub fn status(&self) -> Status {
        self.status
    }
    /// The C ABI's numeric status code (`HWYATTN_INVALID_ARGUMENT` = 1, ...).
    pub fn code(&self) -> u32 {
        self.status.code()
    }
    /// What was wrong, naming the argument and the value.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn invalid(message: String) -> Error {
        Error {
            status: Status::InvalidArgument,
            message,
        }
    }

    pub(crate) fn internal(message: String) -> Error {
        Error {
            status: Status::InternalError,
            message,
        }
    }

    /// Ok for `HWYATTN_OK`; otherwise the status with this thread's
    /// `hwyattn_last_error()`, which must be read before any other hwyattn
    /// call on this thread (it is valid until then).
    pub(crate) fn check(code: sys::hwyattn_status) -> Result<()> {
        if code == sys::HWYATTN_OK {
            return Ok(());
        }
        // SAFETY: hwyattn_last_error never returns NULL; the text is a
        // NUL-terminated string valid until this thread's next hwyattn call,
        // and it is copied before that.
        let message = unsafe { CStr::from_ptr(sys::hwyattn_last_error()) }
            .to_string_lossy()
            .into_owned();
        Err(Error {
            status: Status::from_code(code),
            message,
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: hwyattn_status_string returns a static string, never NULL.
        let name = unsafe { CStr::from_ptr(sys::hwyattn_status_string(self.status.code())) };
        let name = name.to_string_lossy();
        // "HWYATTN_INVALID_ARGUMENT: invalid argument": keep the symbol only.
        let name = name.split(':').next().unwrap_or("hwyattn error");
        write!(f, "{}: {}", name, self.message)
    }
}

impl std::error::Error for Error {}
