//! Test origins and clients for cswitch (written by the testkit helper).
