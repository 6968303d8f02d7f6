//! The mail wing: SMTP (`smtp`), POP3 and IMAP (`login`) listeners speak the start of the
//! dialogue themselves, route on the envelope or the login, replay it to the chosen server
//! and tunnel; `dialogue` holds the socket steps they share.

pub mod dialogue;
pub mod login;
pub mod smtp;
