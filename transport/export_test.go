package transport

// Pending is pending, for the tests of package transport_test.
var Pending = pending
