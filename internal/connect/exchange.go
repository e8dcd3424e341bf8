package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
)

// Token exchange (RFC 8693) names.
const (
	grantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeJWT       = "urn:ietf:params:oauth:token-type:jwt"
)

// maxExchangeAnswer bounds a token endpoint's answer.
const maxExchangeAnswer = 1 << 20

// exchangeAnswer is a token endpoint's answer, success or error.
type exchangeAnswer struct {
	AccessToken      string `json:"access_token"`
	TokenType        string `json:"token_type"`
	IssuedTokenType  string `json:"issued_token_type"`
	ExpiresIn        int64  `json:"expires_in"`
	Scope            string `json:"scope"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// exchange trades the gateway's identity token for w (audience: the
// connection's name) for the service's access token, and keeps it until
// it expires. Exchanges at once for one user may each ask: the service's
// answers are interchangeable, and none is spent.
func (m *Manager) exchange(ctx context.Context, c *Config, w Who, key string) (string, error) {
	if w.User == "" {
		return "", fmt.Errorf("connection %s exchanges the user's identity token, and the call names no user", c.Name)
	}
	subject, err := m.sign(w.User, w.Install, c.Name)
	if err != nil {
		return "", fmt.Errorf("connection %s: signing the identity token: %v", c.Name, err)
	}
	form := url.Values{
		"grant_type":         {grantTokenExchange},
		"subject_token":      {subject},
		"subject_token_type": {tokenTypeJWT},
	}
	if c.Audience != "" {
		form.Set("audience", c.Audience)
	}
	ctx, cancel := context.WithTimeout(ctx, endpointTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Exchange, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if c.ClientID != "" {
		req.SetBasicAuth(url.QueryEscape(c.ClientID), url.QueryEscape(c.ClientSecret))
	}
	resp, err := m.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return "", fmt.Errorf("connection %s: the token exchange failed: %v", c.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxExchangeAnswer))
	if err != nil {
		return "", fmt.Errorf("connection %s: reading the token exchange's answer: %v", c.Name, err)
	}
	var a exchangeAnswer
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	decodeErr := json.Unmarshal(body, &a, json.RejectUnknownMembers(false))
	if resp.StatusCode != http.StatusOK {
		why := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if decodeErr == nil && a.Error != "" {
			why += " " + clip(a.Error, 64)
			if a.ErrorDescription != "" {
				why += ": " + clip(a.ErrorDescription, 200)
			}
		}
		return "", fmt.Errorf("connection %s: the token exchange was refused (%s)", c.Name, why)
	}
	if mt != "application/json" || decodeErr != nil || a.AccessToken == "" {
		return "", fmt.Errorf("connection %s: the token exchange answered no access token", c.Name)
	}
	m.event(c.Name, eventExchanged)
	now := m.clock.Now()
	t := &token{Access: a.AccessToken, Type: a.TokenType, Scope: a.Scope, Created: now}
	if a.ExpiresIn > 0 {
		t.Expiry = now.Add(time.Duration(a.ExpiresIn) * time.Second)
		// Kept only while fresh: an answer without expiry is used once.
		if err := m.save(ctx, key, t); err != nil {
			return "", err
		}
	}
	return t.Access, nil
}
