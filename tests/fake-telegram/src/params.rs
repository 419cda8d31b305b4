//! Reads a Bot API request's parameters the three ways clients send them: query string,
//! JSON body, urlencoded form, multipart form (with file parts).

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::header::CONTENT_TYPE;
use serde_json::{Map, Value};

use crate::state::UploadedFile;

pub(crate) struct Params {
    pub params: Map<String, Value>,
    pub files: Vec<UploadedFile>,
}

pub(crate) async fn read(request: Request) -> Result<Params, String> {
    let mut params = Map::new();
    if let Some(query) = request.uri().query() {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_str(query).map_err(|e| format!("bad query: {e}"))?;
        for (key, value) in pairs {
            params.insert(key, Value::String(value));
        }
    }
    let content_type = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut files = Vec::new();
    if content_type.starts_with("multipart/form-data") {
        let mut multipart = Multipart::from_request(request, &())
            .await
            .map_err(|e| format!("bad multipart: {e}"))?;
        while let Some(field) = multipart
            .next_field()
            .await
            .map_err(|e| format!("bad multipart field: {e}"))?
        {
            let name = field.name().unwrap_or_default().to_owned();
            let file_name = field.file_name().map(str::to_owned);
            let content_type = field.content_type().map(str::to_owned);
            let bytes = field.bytes().await.map_err(|e| format!("bad part: {e}"))?;
            if file_name.is_some() {
                files.push(UploadedFile {
                    field: name.clone(),
                    file_name,
                    bytes: bytes.len(),
                    content_type,
                    audio_format: crate::audio_format::classify(&bytes),
                });
                params.insert(name, Value::String("<file>".into()));
            } else {
                params.insert(
                    name,
                    Value::String(String::from_utf8_lossy(&bytes).into_owned()),
                );
            }
        }
        return Ok(Params { params, files });
    }
    let body = Bytes::from_request(request, &())
        .await
        .map_err(|e| format!("bad body: {e}"))?;
    if body.is_empty() {
        return Ok(Params { params, files });
    }
    if content_type.starts_with("application/json") {
        let value: Value = serde_json::from_slice(&body).map_err(|e| format!("bad JSON: {e}"))?;
        let Value::Object(object) = value else {
            return Err("JSON body is not an object".into());
        };
        params.extend(object);
    } else {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(&body).map_err(|e| format!("bad form: {e}"))?;
        for (key, value) in pairs {
            params.insert(key, Value::String(value));
        }
    }
    Ok(Params { params, files })
}
