//! TCP stream halves that work with both real tokio and madsim.
//!
//! Real tokio splits a stream into owned halves without a lock (`into_split`); madsim's
//! simulated `TcpStream` has no such method, so under `cfg(madsim)` the halves are tokio's
//! generic `io::split` of the stream. The rest of the runtime only names [`ReadHalf`],
//! [`WriteHalf`] and [`split`], so the normal build is exactly what it was.

use tokio::net::TcpStream;

#[cfg(not(madsim))]
pub type ReadHalf = tokio::net::tcp::OwnedReadHalf;
#[cfg(not(madsim))]
pub type WriteHalf = tokio::net::tcp::OwnedWriteHalf;

#[cfg(madsim)]
pub type ReadHalf = tokio::io::ReadHalf<TcpStream>;
#[cfg(madsim)]
pub type WriteHalf = tokio::io::WriteHalf<TcpStream>;

/// The read and write halves of `stream`, to be used from two tasks.
pub fn split(stream: TcpStream) -> (ReadHalf, WriteHalf) {
    #[cfg(not(madsim))]
    {
        stream.into_split()
    }
    #[cfg(madsim)]
    {
        tokio::io::split(stream)
    }
}
