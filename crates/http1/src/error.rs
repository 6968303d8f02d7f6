//! Every way a head or body can be refused, with the status the client gets.

/// Why a head was refused. `status()` is what the client (or, for responses, the
/// proxy's 502 decision) gets; `reason()` is a short text for the body and the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    /// Head longer than `max_head_bytes` (→ 431).
    #[error("request header section too large")]
    HeadTooLarge,
    /// More fields than `max_headers` (→ 431).
    #[error("too many header fields")]
    TooManyHeaders,
    /// Start line does not parse (→ 400).
    #[error("malformed start line")]
    BadStartLine,
    /// Version other than HTTP/1.0 or HTTP/1.1 (→ 505).
    #[error("HTTP version not supported")]
    BadVersion,
    /// A field line does not parse (→ 400).
    #[error("malformed header field")]
    BadHeader,
    /// CR not followed by LF, or LF not preceded by CR (RFC 9112 §2.2) (→ 400).
    #[error("bare CR or LF in head")]
    BareLineEnd,
    /// obs-fold continuation line (RFC 9112 §5.2) (→ 400).
    #[error("obsolete line folding")]
    ObsFold,
    /// Whitespace between field name and colon (RFC 9112 §5.1) (→ 400).
    #[error("whitespace before colon in header field")]
    SpaceBeforeColon,
    /// Control character or byte above 0x7E in the request-target (RFC 9112 §3.2) (→ 400).
    #[error("invalid byte in request-target")]
    BadTarget,
    /// A request-target whose form does not fit the method (RFC 9112 §3.2): an asterisk
    /// other than OPTIONS's `*`, an authority without CONNECT, neither origin form
    /// (`/path`) nor absolute form (`http://host/path`), or a fragment (→ 400).
    #[error("request-target form does not fit the method")]
    BadTargetForm,
    /// CONNECT: a content switch does not open tunnels to arbitrary hosts (→ 501).
    #[error("CONNECT is not supported")]
    Connect,
    /// HTTP/1.1 request without Host, or with several (RFC 9112 §3.2) (→ 400).
    #[error("missing or repeated Host header")]
    BadHost,
    /// Both Content-Length and Transfer-Encoding (RFC 9112 §6.3) (→ 400).
    #[error("both Content-Length and Transfer-Encoding")]
    LengthAndChunked,
    /// Content-Length not a decimal number, or several differing values (→ 400).
    #[error("invalid Content-Length")]
    BadContentLength,
    /// Transfer-Encoding in an HTTP/1.0 message (→ 400).
    #[error("Transfer-Encoding in HTTP/1.0")]
    ChunkedInHttp10,
    /// Transfer-Encoding whose final coding is not chunked, or chunked twice (→ 400).
    #[error("final transfer coding is not chunked")]
    ChunkedNotLast,
    /// A transfer coding this proxy does not implement (→ 501).
    #[error("unknown transfer coding")]
    UnknownCoding,
    /// Status code not three digits 100–599 (responses only).
    #[error("invalid status code")]
    BadStatus,
}

impl HeadError {
    /// HTTP status a client gets for this refusal of its request.
    pub fn status(&self) -> u16 {
        match self {
            HeadError::HeadTooLarge | HeadError::TooManyHeaders => 431,
            HeadError::BadVersion => 505,
            HeadError::UnknownCoding | HeadError::Connect => 501,
            _ => 400,
        }
    }

    /// Short reason for the response body and the log.
    pub fn reason(&self) -> &'static str {
        match self {
            HeadError::HeadTooLarge => "request header section too large",
            HeadError::TooManyHeaders => "too many header fields",
            HeadError::BadStartLine => "malformed start line",
            HeadError::BadVersion => "HTTP version not supported",
            HeadError::BadHeader => "malformed header field",
            HeadError::BareLineEnd => "bare CR or LF in head",
            HeadError::ObsFold => "obsolete line folding",
            HeadError::SpaceBeforeColon => "whitespace before colon in header field",
            HeadError::BadTarget => "invalid byte in request-target",
            HeadError::BadTargetForm => "request-target form does not fit the method",
            HeadError::Connect => "CONNECT is not supported",
            HeadError::BadHost => "missing or repeated Host header",
            HeadError::LengthAndChunked => "both Content-Length and Transfer-Encoding",
            HeadError::BadContentLength => "invalid Content-Length",
            HeadError::ChunkedInHttp10 => "Transfer-Encoding in HTTP/1.0",
            HeadError::ChunkedNotLast => "final transfer coding is not chunked",
            HeadError::UnknownCoding => "unknown transfer coding",
            HeadError::BadStatus => "invalid status code",
        }
    }
}

/// Why a body was refused while it streamed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Chunk-size line is not hex, overflows, or is too long (RFC 9112 §7.1).
    #[error("invalid chunk size")]
    BadChunkSize,
    /// Chunk extension malformed or too long (RFC 9112 §7.1.1).
    #[error("invalid chunk extension")]
    BadChunkExtension,
    /// Chunk data not followed by CRLF.
    #[error("chunk data not followed by CRLF")]
    BadChunkEnd,
    /// Trailer section malformed or larger than the head limit (RFC 9112 §7.1.2).
    #[error("invalid trailer section")]
    BadTrailer,
    /// Body larger than the configured maximum (→ 413).
    #[error("body too large")]
    TooLarge,
}

impl BodyError {
    /// HTTP status a client gets when its request body is refused.
    pub fn status(&self) -> u16 {
        match self {
            BodyError::TooLarge => 413,
            _ => 400,
        }
    }
}
