package dispatch

// SocketOf is socketOf for the tests of package dispatch_test.
var SocketOf = socketOf
