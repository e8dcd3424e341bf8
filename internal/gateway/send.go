package gateway

import (
	"context"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/result"
)

// Dispatch runs one target with the given input, the way its kind says,
// and returns the normalized answer. A card button's target takes this
// path; a card it answers is not read as one.
//
// A target that needs a connection the user has not made answers an
// error result naming it: no card is made here.
func (g *Gateway) Dispatch(ctx context.Context, t *dispatch.Target, input any, call Call) result.Result {
	return t.Kind().Execute(t, &runner{g: g, ctx: ctx, caller: ctx, call: call, input: input}).Result
}

// send sends a target's request over HTTP (dispatch.Executor's Send) and
// normalizes the answer; an action-required card is returned as it came,
// for the caller to check.
//
// tokens are the user's access tokens of the target's connections.
func (g *Gateway) send(ctx context.Context, t *dispatch.Target, input any, call Call, how dispatch.Sending, tokens map[string]string) dispatch.Outcome {
	ctx, cancel := g.client.WithTimeout(ctx)
	defer cancel()
	req, err := t.Request(ctx, input, tokens)
	if err != nil {
		return dispatch.Outcome{Result: result.Failure("the call could not be built: %v", err)}
	}
	if how.Identity {
		auth, err := g.issuer.Authorization(call.Identity.User, call.Identity.Install, t.Component.Name)
		if err != nil {
			g.logger.Error("signing identity token", zap.Error(err))
			return dispatch.Outcome{Result: result.Failure("the gateway could not sign the identity token")}
		}
		// The three values share one array (Header.Set makes a slice for
		// each); each slice's capacity is its length, so that an append to
		// one copies it rather than overwriting the next.
		v := []string{auth, contextHeader(&call), dispatch.IdempotencyKey(call.Identity.User, call.Identity.Install, call.CallID)}
		req.Header["Authorization"] = v[0:1:1]
		req.Header["Kazzle-Tool-Context"] = v[1:2:2]
		req.Header["Idempotency-Key"] = v[2:3:3]
	}
	sent := g.clock.Now()
	resp, err := g.client.Do(req)
	g.obs.Upstream(call.Tool, g.clock.Now().Sub(sent))
	if err != nil {
		return dispatch.Outcome{Result: result.Failure("%s %s failed: %v", t.Spec.Method, t.Describe(), err)}
	}
	if len(tokens) > 0 {
		resp.Body = redactBody(resp.Body, tokens)
		redactHeader(resp.Header, tokens)
	}
	if resp.Status < 200 || resp.Status > 299 {
		g.logFailure(call, t, resp)
	}
	if t.Mapping != nil {
		return dispatch.Outcome{Result: g.checkEmbed(t, how, t.Mapping.Apply(resp.Status, resp.Header, resp.Body)), Upstream: resp.Status}
	}
	var res result.Result
	var isCard bool
	if op := t.Spec.Operation; op != nil {
		res, isCard = result.FromOperation(resp.Status, resp.Header.Get("Content-Type"), resp.Body, op.Output)
	} else {
		res, isCard = result.NormalizeOrCard(resp.Status, resp.Header.Get("Content-Type"), resp.Body)
	}
	out := dispatch.Outcome{Result: g.checkEmbed(t, how, res), Upstream: resp.Status}
	if isCard {
		out.Card = resp.Body
	}
	return out
}

// maxLoggedBody bounds what the log keeps of a failing answer's body.
const maxLoggedBody = 4 << 10

// logFailure keeps a failing answer's body in the log: the model reads
// only its first line or its page's text, at most 200 characters
// (result.ErrorText), and whoever runs the gateway may need the rest, such
// as the stack trace.
func (g *Gateway) logFailure(call Call, t *dispatch.Target, resp *outbound.Response) {
	ce := g.logger.Check(zapcore.InfoLevel, "upstream answered an error")
	if ce == nil {
		return
	}
	body := resp.Body[:min(len(resp.Body), maxLoggedBody)]
	ce.Write(zap.String("tool", call.Tool), zap.String("call_id", call.CallID), zap.String("target", t.Describe()),
		zap.Int("status", resp.Status), zap.String("content_type", resp.Header.Get("Content-Type")),
		zap.ByteString("body", body), zap.Bool("body_truncated", len(body) < len(resp.Body)))
}

// EmbedOrigins are the origins besides the components' whose pages may
// be shown as embeds (Config.EmbedOrigins): a url target's, and the MCP
// Apps view's frameDomains.
func (g *Gateway) EmbedOrigins() []string { return g.embedList }

// checkEmbed refuses, when how says to check embeds, an embedUrl on an
// origin that is not in embed_origins: the card frames it on the app's
// page, and a url target's answer is not the app's to vouch for (an app
// target's is: its component is the app's own).
func (g *Gateway) checkEmbed(t *dispatch.Target, how dispatch.Sending, res result.Result) result.Result {
	if res.EmbedURL == "" || !how.CheckEmbeds {
		return res
	}
	if o := result.OriginOf(res.EmbedURL); !g.embeds[o] {
		return result.Failure("%s %s answered an embedUrl on %s, which is not one of embed_origins: the embed was dropped", t.Spec.Method, t.Describe(), o)
	}
	return res
}
