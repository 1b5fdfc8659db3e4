package webhook

// ASCIIHost exposes asciiHost to the package's tests.
var ASCIIHost = asciiHost
