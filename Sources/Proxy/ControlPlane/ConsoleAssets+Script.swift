extension ConsoleAssets {
    /// The page's script: reads the control endpoints with `fetch` (the key, when asked for, in
    /// `X-Proxy-Key`; never a cookie), reads the event stream as a `fetch` body (an `EventSource`
    /// cannot send the key), and renders with `textContent` only (no HTML from data).
    static let scriptText = #"""
        'use strict';
        (() => {
          const $ = (id) => document.getElementById(id);
          const keyName = 'platformProxyKey';
          let key = sessionStorage.getItem(keyName);
          let keyWanted = false;
          const providers = new Map();
          let consoleState = null;
          let requests = [];
          let selected = null;
          let shownState = null;

          function el(tag, attrs, ...children) {
            const node = document.createElement(tag);
            for (const [name, value] of Object.entries(attrs || {})) {
              if (value === null || value === undefined || value === false) continue;
              if (name === 'text') node.textContent = value;
              else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
              else node.setAttribute(name, value === true ? '' : value);
            }
            for (const child of children) if (child !== null && child !== undefined) node.append(child);
            return node;
          }
          const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
          const say = (text, bad) => { const s = $('status'); s.textContent = text; s.className = bad ? 'error' : ''; };
          const when = (seconds) => seconds ? new Date(seconds * 1000).toLocaleString() : '—';

          function askForKey() {
            keyWanted = true;
            $('key-form').hidden = false;
            say('This proxy requires its key.', true);
          }
          $('key-form').addEventListener('submit', (event) => {
            event.preventDefault();
            key = $('key-input').value;
            sessionStorage.setItem(keyName, key);
            $('key-input').value = '';
            $('key-form').hidden = true;
            keyWanted = false;
            refresh();
          });

          // Every request of the page: same origin, no cookie, the key when there is one.
          async function api(path, method, body) {
            const headers = {};
            if (key) headers['X-Proxy-Key'] = key;
            if (body !== undefined) headers['Content-Type'] = 'application/json';
            const reply = await fetch(path, { method: method || 'GET', headers, credentials: 'omit', cache: 'no-store',
              body: body === undefined ? undefined : JSON.stringify(body) });
            if (reply.status === 401) {
              const answer = await reply.clone().json().catch(() => ({}));
              if (answer.error === 'proxy_key_required') { askForKey(); throw new Error('The proxy key is required.'); }
            }
            return reply;
          }
          async function act(what, path, method, body) {
            try {
              const reply = await api(path, method, body);
              const answer = await reply.json().catch(() => ({}));
              if (!reply.ok) {
                say(what + ' refused: ' + (answer.message || answer.error || reply.status), true);
                // Drawn again from the proxy's state: a control left showing a refused choice would lie.
                shownState = null;
                loadState().catch(() => {});
                return null;
              }
              say(what + ': done.');
              refresh();
              return answer;
            } catch (error) { say(what + ' failed: ' + error.message, true); return null; }
          }

          // ---- Sign-in
          function renderSignIn() {
            const body = $('signin-body');
            body.replaceChildren();
            const configured = (consoleState && consoleState.providers) || [];
            if (providers.size === 0 && configured.length === 0) { body.append(el('p', { text: 'No provider is configured.' })); return; }
            const several = configured.length > 1;
            for (const [name, p] of providers) {
              const info = configured.find((c) => c.name === name) || {};
              const query = several ? '?provider=' + encodeURIComponent(name) : '';
              const dl = el('dl', {},
                el('dt', { text: 'State' }), el('dd', { class: 'state-' + p.state, 'data-provider-state': name, text: p.state }),
                el('dt', { text: 'Subject' }), el('dd', { text: p.subject || '—' }),
                el('dt', { text: 'Expires' }), el('dd', { text: when(p.expiresAt) }),
                el('dt', { text: 'Last error' }), el('dd', { text: p.lastError || '—' }));
              const actions = el('div', { class: 'actions' });
              if (info.grant === 'authorization_code') {
                actions.append(el('a', { class: 'button', href: '/_platform/login' + query, target: '_blank', rel: 'noopener',
                  'aria-label': 'Log in to ' + name + ' in the browser', text: 'Log in (browser)' }));
                actions.append(el('button', { type: 'button', 'aria-label': 'Log in to ' + name + ' with a device code', text: 'Log in with a code',
                  onclick: async () => {
                    const device = await act('Device login of ' + name, '/_platform/login/device' + query, 'POST');
                    if (device) showDevice(device);
                  } }));
              }
              if (info.demo) {
                actions.append(el('button', { type: 'button', 'aria-label': 'Demo login to ' + name, text: 'Demo login',
                  onclick: () => act('Demo login of ' + name, '/_platform/login/demo' + query, 'POST') }));
              }
              if (info.grant && info.grant !== 'static') {
                actions.append(el('button', { type: 'button', 'aria-label': 'Log out of ' + name, text: 'Log out',
                  onclick: () => act('Log out of ' + name, '/_platform/logout' + query, 'POST') }));
              }
              body.append(el('h3', { text: name }), dl, actions);
            }
          }
          function showDevice(device) {
            const link = device.verification_uri_complete || device.verification_uri;
            $('device-code').replaceChildren(
              el('p', { text: 'Enter this code at the sign-in page of ' + device.provider + ':' }),
              el('p', { class: 'code', 'aria-label': 'Device code for ' + device.provider, text: device.user_code }),
              el('p', {}, el('a', { href: link, target: '_blank', rel: 'noopener noreferrer',
                'aria-label': 'Open the sign-in page of ' + device.provider, text: link })));
          }
          function providerState(name, fields) {
            const before = providers.get(name);
            if (before && JSON.stringify(before) === JSON.stringify(fields)) return;
            providers.set(name, fields);
            if (fields.loggedIn) $('device-code').replaceChildren();
            renderSignIn();
          }
          async function loadAuth() {
            const reply = await api('/_platform/auth');
            if (!reply.ok) return;
            const auth = await reply.json();
            if (auth.providers) for (const [name, fields] of Object.entries(auth.providers)) providerState(name, fields);
          }
          // The console's event stream (each provider's state, each finished request), read from a
          // fetch body so it can carry the key; reconnects.
          async function followEvents() {
            for (;;) {
              if (!keyWanted) {
                try {
                  const reply = await api('/_platform/console/events');
                  if (reply.ok && reply.body) {
                    const reader = reply.body.getReader();
                    const decoder = new TextDecoder();
                    let buffer = '';
                    for (;;) {
                      const { value, done } = await reader.read();
                      if (done) break;
                      buffer += decoder.decode(value, { stream: true });
                      let end;
                      while ((end = buffer.indexOf('\n\n')) >= 0) {
                        const block = buffer.slice(0, end);
                        buffer = buffer.slice(end + 2);
                        let event = 'message', data = '';
                        for (const line of block.split('\n')) {
                          if (line.startsWith('event: ')) event = line.slice(7);
                          else if (line.startsWith('data: ')) data += line.slice(6);
                        }
                        if (event === 'state' && data) {
                          const fields = JSON.parse(data);
                          providerState(fields.provider, fields);
                        } else if (event === 'request' && data) {
                          requestArrived(JSON.parse(data));
                        }
                      }
                    }
                  }
                } catch (error) { /* reconnect below */ }
              }
              await sleep(1000);
            }
          }

          // ---- Requests
          function matches(r, filter) {
            if (!filter) return true;
            const text = [r.method, r.path, r.route, String(r.status), r.upstream, r.credentials].join(' ').toLowerCase();
            return filter.toLowerCase().split(/\s+/).every((word) => text.includes(word));
          }
          function renderRequests() {
            const filter = $('requests-filter').value.trim();
            const rows = requests.filter((r) => matches(r, filter)).map((r) => el('tr', { 'data-id': r.id, 'data-route': r.route, 'data-status': r.status },
              el('td', { text: new Date(r.time * 1000).toLocaleTimeString() }),
              el('td', { text: r.method }),
              el('td', { class: 'path' }, el('button', { type: 'button', class: 'link', 'aria-label': 'Details of ' + r.method + ' ' + r.path + ' at ' + new Date(r.time * 1000).toLocaleTimeString(),
                text: r.path, onclick: () => { selected = r.id; renderDetail(); } })),
              el('td', { text: r.route || '(no route)' }),
              el('td', { class: 'status-' + String(r.status)[0], text: String(r.status) }),
              el('td', { text: r.durationMs.toFixed(1) }),
              el('td', { text: r.upstream || '—' }),
              el('td', { text: r.credentials.replaceAll('_', ' ') })));
            $('requests-rows').replaceChildren(...rows);
            renderDetail();
          }
          function renderDetail() {
            const r = requests.find((x) => x.id === selected);
            const box = $('request-detail');
            if (!r) { box.replaceChildren(); return; }
            const reasons = { injected: 'injected on every hop', not_a_credential_host: 'not injected: a redirect left the credential hosts',
              gated: 'not sent upstream: no usable login (gated)', no_provider: 'none: the route carries no credential (no provider)',
              mock: 'none: answered from the mock folder' };
            box.replaceChildren(el('h3', { text: 'Request ' + r.method + ' ' + r.path }), el('dl', {},
              el('dt', { text: 'Time' }), el('dd', { text: new Date(r.time * 1000).toISOString() }),
              el('dt', { text: 'Route' }), el('dd', { text: r.route || '(no route)' }),
              el('dt', { text: 'Status' }), el('dd', { text: String(r.status) }),
              el('dt', { text: 'Duration' }), el('dd', { text: r.durationMs + ' ms' }),
              el('dt', { text: 'Upstream' }), el('dd', { text: r.upstream || '—' }),
              el('dt', { text: 'Credentials' }), el('dd', { text: reasons[r.credentials] || r.credentials }),
              el('dt', { text: 'Redirects followed' }), el('dd', { text: String(r.redirects) }),
              el('dt', { text: 'Echoes masked' }), el('dd', { text: String(r.maskedEchoes) })),
              el('button', { type: 'button', 'aria-label': 'Close the request details', text: 'Close', onclick: () => { selected = null; renderDetail(); } }));
          }
          $('requests-filter').addEventListener('input', renderRequests);
          // Records arrive in bursts (a new stream is sent the whole ring): drawn once per frame.
          const byId = new Map();
          let drawPending = false;
          function requestArrived(record) {
            if (byId.has(record.id)) return;
            byId.set(record.id, record);
            requests.push(record);
            if (drawPending) return;
            drawPending = true;
            requestAnimationFrame(() => {
              drawPending = false;
              requests.sort((a, b) => b.time - a.time);
              for (const old of requests.splice(500)) byId.delete(old.id);
              renderRequests();
            });
          }

          // ---- Mocks, experiments, analytics, config (one state read)
          function renderMocks(s) {
            $('mocks-global').textContent = 'Global mock switch: ' + (s.globalMock ? 'on (routes without their own mode replay)' : 'off')
              + (s.mockSwitchable ? '' : ' — switching is refused under the release profile');
            const rows = s.routes.filter((r) => r.mock !== null).map((r) => {
              const modes = r.mockReplayOnly ? ['replay'] : ['replay', 'record', 'off'];
              const select = el('select', { 'aria-label': 'Mock mode of route ' + r.name, disabled: !s.mockSwitchable,
                onchange: (event) => act('Mock mode of ' + r.name, '/_platform/mock', 'POST', { route: r.name, mode: event.target.value }) },
                ...modes.map((m) => el('option', { value: m, selected: m === r.mock, text: m })));
              return el('tr', {}, el('td', { text: r.name }), el('td', { text: r.path }), el('td', { 'data-mock-mode': r.name, text: r.mock }), el('td', {}, select));
            });
            $('mocks-body').replaceChildren(rows.length === 0 ? el('p', { text: 'No route has a mock folder.' }) :
              el('table', {}, el('thead', {}, el('tr', {}, ...['Route', 'Path', 'Mode', 'Switch'].map((t) => el('th', { scope: 'col', text: t })))), el('tbody', {}, ...rows)));
          }
          function renderExperiments(s) {
            const body = $('experiments-body');
            if (!s.experiments || s.experiments.length === 0) { body.replaceChildren(el('p', { text: 'No experiments are configured.' })); return; }
            body.replaceChildren(...s.experiments.map((x) => {
              const choice = el('select', { 'aria-label': 'Override variant of experiment ' + x.name },
                ...x.variants.map((v) => el('option', { value: v, selected: v === x.variant, text: v })));
              return el('div', {}, el('h3', { text: x.name }), el('dl', {},
                el('dt', { text: 'Variants' }), el('dd', { text: x.variants.map((v, i) => v + ' (' + Math.round(x.weights[i] * 100) + '%)').join(', ') }),
                el('dt', { text: 'Your variant' }), el('dd', { 'data-experiment-variant': x.name, text: x.variant }),
                el('dt', { text: 'Reason' }), el('dd', { 'data-experiment-reason': x.name, text: x.reason })),
                el('div', { class: 'actions' }, choice,
                  el('button', { type: 'button', 'aria-label': 'Set the override of experiment ' + x.name, text: 'Set override',
                    onclick: () => act('Override of ' + x.name, '/_platform/experiments/' + encodeURIComponent(x.name), 'PUT', { variant: choice.value }) }),
                  el('button', { type: 'button', 'aria-label': 'Clear the override of experiment ' + x.name, text: 'Clear override',
                    onclick: () => act('Override of ' + x.name + ' cleared', '/_platform/experiments/' + encodeURIComponent(x.name), 'DELETE') })));
            }));
          }
          function renderAnalytics(s) {
            const a = s.analytics;
            if (!a) { $('analytics-body').replaceChildren(el('p', { text: 'Analytics is not configured.' })); return; }
            $('analytics-body').replaceChildren(el('dl', {},
              el('dt', { text: 'Queue depth' }), el('dd', { 'data-analytics-depth': 'true', text: String(a.depth) }),
              el('dt', { text: 'Accepted' }), el('dd', { text: String(a.queued) }),
              el('dt', { text: 'Uploaded' }), el('dd', { text: String(a.sent) }),
              el('dt', { text: 'Last upload' }), el('dd', { text: when(a.lastUpload) }),
              a.lastProblem ? el('dt', { text: 'Upload problem' }) : null,
              a.lastProblem ? el('dd', { class: 'error', 'data-analytics-problem': 'true', text: a.lastProblem.reason + ' (' + when(a.lastProblem.time) + ')' }) : null,
              el('dt', { text: 'Refused by the endpoint' }), el('dd', { text: String(a.droppedRejected) })),
              el('table', { 'data-analytics-latest': 'true' }, el('caption', { text: 'Latest events stored' }),
                el('thead', {}, el('tr', {}, ...['Time', 'Key', 'Value'].map((t) => el('th', { scope: 'col', text: t })))),
                el('tbody', {}, ...a.latest.map((v) => el('tr', {}, el('td', { text: when(v.timestamp) }), el('td', { text: v.key }),
                  el('td', { text: v.value }))))));
          }
          function renderConfig(s) {
            const r = s.reload;
            $('config-body').replaceChildren(el('dl', {},
              el('dt', { text: 'Profile' }), el('dd', { text: s.profile || '(none)' }),
              el('dt', { text: 'Last load' }), el('dd', { class: r.lastSucceeded ? '' : 'error', text: (r.lastSucceeded ? 'succeeded' : 'failed (the previous config is in force)') + ', last success ' + when(r.lastSuccessTime) }),
              el('dt', { text: 'Reloads' }), el('dd', { text: r.ok + ' applied, ' + r.failed + ' refused' }),
              r.lastErrors ? el('dt', { text: 'Last reload errors' }) : null,
              r.lastErrors ? el('dd', {}, el('pre', { class: 'error', 'data-reload-errors': 'true', text: r.lastErrors })) : null),
              el('div', { class: 'scroll' }, el('table', {}, el('caption', { text: 'Routes' }),
                el('thead', {}, el('tr', {}, ...['Route', 'Path', 'Upstream', 'Credential', 'Provider', 'Retry 401', 'Redirects', 'Timeout s'].map((t) => el('th', { scope: 'col', text: t })))),
                el('tbody', {}, ...s.routes.map((x) => el('tr', {}, ...[x.name, x.path, x.upstream || '(mock only)', x.credential, x.provider || '—',
                  x.retryOn401 ? 'yes' : 'no', x.followRedirects ? 'follow' : 'relay', String(x.timeoutSeconds)].map((t) => el('td', { text: t }))))))));
          }
          async function loadState() {
            const reply = await api('/_platform/console/state');
            if (!reply.ok) return;
            const text = await reply.text();
            // Rendered again only when something changed: a control a person is using stays in place.
            if (text === shownState) return;
            shownState = text;
            consoleState = JSON.parse(text);
            renderMocks(consoleState);
            renderExperiments(consoleState);
            renderAnalytics(consoleState);
            renderConfig(consoleState);
            if (providers.size === 0) renderSignIn();
          }

          async function refresh() {
            try {
              await loadState();
              await loadAuth();
              if (!keyWanted && $('status').className !== 'error') say('Live.');
            } catch (error) { /* said already */ }
          }
          async function poll() {
            for (;;) {
              await sleep(1000);
              if (keyWanted) continue;
              try { await loadState(); } catch (error) { /* the next round retries */ }
            }
          }
          refresh().then(() => { document.body.dataset.ready = 'true'; });
          followEvents();
          poll();
        })();
        """#
}
