//! A minimal W3C WebDriver client (JSON over HTTP, <https://www.w3.org/TR/webdriver2/>) driving
//! Debian's headless `chromium` through `chromedriver` (package `chromium-driver`; `.ci/run`
//! installs both). Only what the report's browser test needs: open a URL, find elements, click,
//! type, read text, run a script, take a screenshot. Every request and every wait is bounded;
//! dropping the [`Browser`] ends the session (chromedriver then quits chromium) and kills
//! chromedriver.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The key under which WebDriver returns an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Bound on one WebDriver request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on chromedriver's start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// `name` resolved on PATH (chromedriver wants the browser's path).
fn on_path(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from(name))
}

/// An executable from `$var`, else `name` on PATH; panics with how to install it when missing.
fn tool(var: &str, name: &str, package: &str) -> PathBuf {
    let exe = std::env::var_os(var).map_or_else(|| on_path(name), PathBuf::from);
    let found = Command::new(&exe)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "this test needs {name}: install Debian's `{package}` (apt-get install {package}; .ci/run does) or set {var}"
    );
    exe
}

/// A free port on localhost (bound, then released for chromedriver).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

/// A WebDriver error or an unexpected answer.
#[derive(Debug)]
pub struct WebDriverError(pub String);

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Result<T> = std::result::Result<T, WebDriverError>;

/// One headless chromium session through its own chromedriver.
pub struct Browser {
    driver: Child,
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    _profile: tempfile::TempDir,
}

/// An element of the current page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts chromedriver (`$CHROMEDRIVER` or `chromedriver`) and a headless chromium
    /// (`$CHROMIUM` or `chromium`) with a fresh profile.
    pub async fn start() -> Result<Browser> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let driver_exe = tool("CHROMEDRIVER", "chromedriver", "chromium-driver");
        let chromium = tool("CHROMIUM", "chromium", "chromium");
        let profile = tempfile::tempdir().map_err(|e| WebDriverError(format!("temp dir: {e}")))?;
        let port = free_port();
        let driver = Command::new(driver_exe)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| WebDriverError(format!("start chromedriver: {e}")))?;
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| WebDriverError(format!("http client: {e}")))?;
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Browser {
            driver,
            http,
            session: String::new(),
            _profile: profile,
        };
        let started = Instant::now();
        loop {
            let ready = browser
                .http
                .get(format!("{base}/status"))
                .send()
                .await
                .ok()
                .map(|r| r.json::<Value>());
            if let Some(body) = ready
                && let Ok(v) = body.await
                && v["value"]["ready"] == true
            {
                break;
            }
            if let Ok(Some(status)) = browser.driver.try_wait() {
                return Err(WebDriverError(format!("chromedriver exited: {status}")));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(WebDriverError(format!(
                    "chromedriver not ready within {START_TIMEOUT:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,1000".into(),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
            "timeouts": {"script": 30_000, "pageLoad": 60_000, "implicit": 0},
        }}});
        let created = browser
            .call(
                reqwest::Method::POST,
                &format!("{base}/session"),
                Some(caps),
            )
            .await?;
        let id = created["sessionId"]
            .as_str()
            .ok_or_else(|| WebDriverError(format!("no sessionId in {created}")))?;
        browser.session = format!("{base}/session/{id}");
        Ok(browser)
    }

    /// One WebDriver command: its `value`, or the error it reported.
    async fn call(&self, method: reqwest::Method, url: &str, body: Option<Value>) -> Result<Value> {
        let mut req = self.http.request(method.clone(), url);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| WebDriverError(format!("{method} {url}: {e}")))?;
        let status = resp.status();
        let v: Value = resp
            .json()
            .await
            .map_err(|e| WebDriverError(format!("{method} {url}: {status}, body: {e}")))?;
        let value = v.get("value").cloned().unwrap_or(Value::Null);
        if !status.is_success() {
            return Err(WebDriverError(format!(
                "{method} {url}: {status} {}: {}",
                value["error"].as_str().unwrap_or("?"),
                value["message"].as_str().unwrap_or("?")
            )));
        }
        Ok(value)
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.call(
            reqwest::Method::POST,
            &format!("{}{path}", self.session),
            Some(body),
        )
        .await
    }

    async fn get(&self, path: &str) -> Result<Value> {
        self.call(
            reqwest::Method::GET,
            &format!("{}{path}", self.session),
            None,
        )
        .await
    }

    /// Navigates to `url` (waits for the page to load).
    pub async fn goto(&self, url: &str) -> Result<()> {
        self.post("/url", json!({ "url": url })).await.map(drop)
    }

    /// The first element matching the CSS `selector`.
    pub async fn find(&self, selector: &str) -> Result<Element> {
        let v = self
            .post(
                "/element",
                json!({"using": "css selector", "value": selector}),
            )
            .await?;
        v[ELEMENT_KEY]
            .as_str()
            .map(|id| Element(id.to_string()))
            .ok_or_else(|| WebDriverError(format!("no element reference for {selector}: {v}")))
    }

    /// Clicks `element` as a user does (scrolled into view, at its centre).
    pub async fn click(&self, element: &Element) -> Result<()> {
        self.post(&format!("/element/{}/click", element.0), json!({}))
            .await
            .map(drop)
    }

    /// Clicks the element matching `selector`.
    pub async fn click_on(&self, selector: &str) -> Result<()> {
        let e = self.find(selector).await?;
        self.click(&e).await
    }

    /// Types `text` into `element` (key by key, so the page sees input events).
    pub async fn type_into(&self, element: &Element, text: &str) -> Result<()> {
        self.post(
            &format!("/element/{}/value", element.0),
            json!({ "text": text }),
        )
        .await
        .map(drop)
    }

    /// The rendered text of the element matching `selector`.
    pub async fn text(&self, selector: &str) -> Result<String> {
        let e = self.find(selector).await?;
        let v = self.get(&format!("/element/{}/text", e.0)).await?;
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| WebDriverError(format!("text of {selector}: {v}")))
    }

    /// A DOM property (e.g. `value`, `className`) of the element matching `selector`.
    pub async fn property(&self, selector: &str, name: &str) -> Result<Value> {
        let e = self.find(selector).await?;
        self.get(&format!("/element/{}/property/{name}", e.0)).await
    }

    /// Runs `script` (a function body) in the page and returns its result.
    pub async fn execute(&self, script: &str) -> Result<Value> {
        self.post("/execute/sync", json!({"script": script, "args": []}))
            .await
    }

    /// Polls `probe` every 50 ms until it returns `Some`, for at most `limit`.
    pub async fn wait_for<T, F, Fut>(&self, limit: Duration, mut probe: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<T>>>,
    {
        let started = Instant::now();
        loop {
            if let Some(v) = probe().await? {
                return Ok(v);
            }
            if started.elapsed() > limit {
                return Err(WebDriverError(format!(
                    "condition not met within {limit:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Resizes the window to `width` × `height` CSS pixels.
    pub async fn resize(&self, width: u32, height: u32) -> Result<()> {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await
            .map(drop)
    }

    /// A PNG screenshot of the window.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        let v = self.get("/screenshot").await?;
        let b64 = v
            .as_str()
            .ok_or_else(|| WebDriverError("screenshot is not a string".into()))?;
        decode_base64(b64).ok_or_else(|| WebDriverError("screenshot is not base64".into()))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session makes chromedriver quit chromium. Drop cannot await, and may run
        // inside the test's runtime: a short-lived thread with its own runtime does it.
        if !self.session.is_empty() {
            // A fresh client: the session's pooled connections belong to the test's runtime.
            let url = self.session.clone();
            let _ = std::thread::spawn(move || {
                if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    && let Ok(http) = reqwest::Client::builder().build()
                {
                    rt.block_on(async {
                        let _ = http
                            .delete(url)
                            .timeout(Duration::from_secs(10))
                            .send()
                            .await;
                    });
                }
            })
            .join();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 (with padding) to bytes.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\n' | b'\r' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}
