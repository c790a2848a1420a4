package console_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// testProvider is a real OpenID provider (zitadel's op package) on an
// httptest server, with one confidential client and an in-memory storage
// modelled on zitadel's example/server/storage, cut to the authorization
// code flow. Its login page approves at once, as whichever subject the
// test set (as), and the ID token carries the subject's role claim.
type testProvider struct {
	srv    *httptest.Server
	client testClient

	mu      sync.Mutex
	key     *rsa.PrivateKey
	subject string         // who the login page signs in
	claims  map[string]any // subject → the role claim's value (absent: no claim)
	// rewrite, when set, changes the ID token's claims before the token
	// endpoint answers, re-signed with the provider's key.
	rewrite  func(claims map[string]any)
	requests map[string]*testAuthRequest
	codes    map[string]string // code → request id
	// challenges records each authorization request's PKCE method.
	challenges []oidc.CodeChallengeMethod
}

const (
	testClientID     = "ota-console"
	testClientSecret = "console client secret"
	testRoleClaim    = "ota_role"
)

func newTestProvider(t *testing.T, redirectURI string) *testProvider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &testProvider{key: key, claims: map[string]any{}, requests: map[string]*testAuthRequest{}, codes: map[string]string{}}
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.client = testClient{redirect: redirectURI, login: p.srv.URL + "/login"}
	provider, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte("test provider")), CodeMethodS256: true},
		p, op.StaticIssuer(p.srv.URL), op.WithAllowInsecure(), op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		p.mu.Lock()
		req, ok := p.requests[id]
		if ok {
			req.subject, req.done, req.authTime = p.subject, true, time.Now()
		}
		p.mu.Unlock()
		if !ok {
			http.Error(w, "no such request", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, p.srv.URL+"/authorize/callback?id="+id, http.StatusFound)
	})
	mux.Handle("/oauth/token", p.tokenEndpoint(t, provider))
	mux.Handle("/", provider)
	return p
}

// as makes the login page sign in subject, whose role claim is claim (nil:
// none).
func (p *testProvider) as(subject string, claim any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subject = subject
	if claim == nil {
		delete(p.claims, subject)
	} else {
		p.claims[subject] = claim
	}
}

func (p *testProvider) rewriteIDToken(f func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rewrite = f
}

// tokenEndpoint answers as the provider's, with the ID token rewritten
// when the test asked for it.
func (p *testProvider) tokenEndpoint(t *testing.T, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		rewrite := p.rewrite
		p.mu.Unlock()
		if rewrite == nil {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Errorf("token response: %v", err)
			return
		}
		if raw, ok := body["id_token"].(string); ok {
			parts := strings.Split(raw, ".")
			payload, err := base64.RawURLEncoding.DecodeString(parts[1])
			var claims map[string]any
			if err == nil {
				err = json.Unmarshal(payload, &claims)
			}
			if err != nil {
				t.Errorf("ID token: %v", err)
				return
			}
			rewrite(claims)
			body["id_token"] = p.sign(t, claims)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// sign makes a JWT of claims under the provider's key.
func (p *testProvider) sign(t *testing.T, claims map[string]any) string {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: p.key, KeyID: testKey{}.ID()}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ---- op.Storage ----

func (p *testProvider) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	req := &testAuthRequest{id: uuid.NewString(), clientID: r.ClientID, redirect: r.RedirectURI, state: r.State,
		nonce: r.Nonce, scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	p.challenges = append(p.challenges, r.CodeChallengeMethod)
	p.requests[req.id] = req
	return req, nil
}

func (p *testProvider) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.requests[id]; ok {
		return r, nil
	}
	return nil, errors.New("no such request")
}

func (p *testProvider) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	p.mu.Lock()
	id, ok := p.codes[code]
	p.mu.Unlock()
	if !ok {
		return nil, errors.New("no such code")
	}
	return p.AuthRequestByID(ctx, id)
}

func (p *testProvider) SaveAuthCode(_ context.Context, id, code string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.codes[code] = id
	return nil
}

func (p *testProvider) DeleteAuthRequest(_ context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.requests, id)
	for code, rid := range p.codes {
		if rid == id {
			delete(p.codes, code)
		}
	}
	return nil
}

func (p *testProvider) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return uuid.NewString(), time.Now().Add(5 * time.Minute), nil
}

func (p *testProvider) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("no refresh tokens")
}

func (p *testProvider) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (p *testProvider) TerminateSession(context.Context, string, string) error { return nil }

func (p *testProvider) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (p *testProvider) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (p *testProvider) SigningKey(context.Context) (op.SigningKey, error) { return testKey{p.key}, nil }

func (p *testProvider) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (p *testProvider) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{testPublicKey{testKey{p.key}}}, nil
}

func (p *testProvider) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != testClientID {
		return nil, errors.New("no such client")
	}
	return p.client, nil
}

func (p *testProvider) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != testClientID || secret != testClientSecret {
		return errors.New("wrong client credentials")
	}
	return nil
}

func (p *testProvider) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest puts the subject and its role claim in the ID token.
func (p *testProvider) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, r op.IDTokenRequest, _ []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	info.Subject = r.GetSubject()
	if claim, ok := p.claims[r.GetSubject()]; ok {
		info.AppendClaims(testRoleClaim, claim)
	}
	return nil
}

func (p *testProvider) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return nil
}

func (p *testProvider) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return nil
}

func (p *testProvider) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (p *testProvider) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("no client keys")
}

func (p *testProvider) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (p *testProvider) Health(context.Context) error { return nil }

// testKey is the provider's RS256 key, as a signing key and a public key.
type testKey struct{ k *rsa.PrivateKey }

func (testKey) ID() string                                  { return "test-key" }
func (testKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (testKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (testKey) Use() string                                 { return "sig" }

// Key is the private key to sign with; KeySet publishes testPublicKey.
func (k testKey) Key() any { return k.k }

// testPublicKey is what the provider publishes of its key.
type testPublicKey struct{ testKey }

func (k testPublicKey) Key() any { return &k.k.PublicKey }

// testClient is the console, registered at the provider as a confidential
// web client.
type testClient struct{ redirect, login string }

func (c testClient) GetID() string                       { return testClientID }
func (c testClient) RedirectURIs() []string              { return []string{c.redirect} }
func (c testClient) PostLogoutRedirectURIs() []string    { return nil }
func (c testClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c testClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c testClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c testClient) GrantTypes() []oidc.GrantType         { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c testClient) LoginURL(id string) string            { return c.login + "?id=" + id }
func (c testClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c testClient) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c testClient) DevMode() bool                        { return true } // http redirect URIs
func (c testClient) IsScopeAllowed(string) bool           { return false }
func (c testClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c testClient) ClockSkew() time.Duration             { return 0 }
func (c testClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c testClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// testAuthRequest is one authorization request, approved by the login page.
type testAuthRequest struct {
	id, clientID, redirect, state, nonce string
	scopes                               []string
	responseType                         oidc.ResponseType
	responseMode                         oidc.ResponseMode
	challenge                            *oidc.CodeChallenge
	subject                              string
	done                                 bool
	authTime                             time.Time
}

func (r *testAuthRequest) GetID() string                         { return r.id }
func (r *testAuthRequest) GetACR() string                        { return "" }
func (r *testAuthRequest) GetAMR() []string                      { return []string{"pwd"} }
func (r *testAuthRequest) GetAuthTime() time.Time                { return r.authTime }
func (r *testAuthRequest) GetClientID() string                   { return r.clientID }
func (r *testAuthRequest) GetCodeChallenge() *oidc.CodeChallenge { return r.challenge }
func (r *testAuthRequest) GetNonce() string                      { return r.nonce }
func (r *testAuthRequest) GetRedirectURI() string                { return r.redirect }
func (r *testAuthRequest) GetResponseType() oidc.ResponseType    { return r.responseType }
func (r *testAuthRequest) GetResponseMode() oidc.ResponseMode    { return r.responseMode }
func (r *testAuthRequest) GetScopes() []string                   { return r.scopes }
func (r *testAuthRequest) GetState() string                      { return r.state }
func (r *testAuthRequest) GetSubject() string                    { return r.subject }
func (r *testAuthRequest) Done() bool                            { return r.done }

func (r *testAuthRequest) GetAudience() []string { return []string{r.clientID} }
