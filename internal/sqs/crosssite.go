package sqs

// Cross-site request forgery (docs/security.md, "SQS"). The query protocol is a form
// POST (or a GET with the parameters in the URL), which a browser sends for any page
// without asking the server first (a CORS "simple" request): without authentication,
// any site the operator visits could send to, purge or delete the queues of a broker
// on their machine. The browser cannot be stopped from sending, but it says who asks:
// Sec-Fetch-Site (every current browser) and Origin (on every POST). SQS clients —
// the SDKs, the AWS CLI, boto3 — send neither, and a URL typed or pasted into the
// address bar is Sec-Fetch-Site: none without an Origin, so neither is refused.
//
// The judgment is internal/crosssite's (the admin API uses it too). A request with a
// verified SigV4 signature is not refused: what authorizes it is the
// signature, which no page can make for itself. A presigned URL a page links to or
// embeds was handed out by the key's owner to whoever holds it, who could as well
// paste it; it keeps working wherever it is opened from. With authentication on, a
// request without a signature is refused anyway, so the check changes nothing there.

// refuseCrossSite is the answer to a request crosssite.Why names: AccessDenied, in the
// request's protocol, before anything reaches the broker.
func refuseCrossSite(why string) *apiError {
	return newError(errAccessDenied, "A web page of another site may not send requests to this SQS endpoint (%s). "+
		"SQS SDKs and the AWS CLI send neither header, and a URL typed into the browser is served.", why)
}
