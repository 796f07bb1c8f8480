#!/usr/bin/env bash
# Writes a Google service-account JSON as Google hands it out (a fresh RSA key, Google's token
# URI) to DIR/service-account.json, for project PROJECT. Usage: service-account.sh DIR PROJECT PYTHON
set -euo pipefail
dir=$1 project=$2 python=$3
openssl genrsa 2048 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$dir/sa-key.pem"
"$python" - "$dir" "$project" <<'PY'
import json, sys
work, project = sys.argv[1], sys.argv[2]
json.dump({
    "type": "service_account", "project_id": project, "private_key_id": "0123456789abcdef",
    "private_key": open(f"{work}/sa-key.pem").read(),
    "client_email": f"sender@{project}.iam.gserviceaccount.com", "client_id": "1",
    "token_uri": "https://oauth2.googleapis.com/token",
}, open(f"{work}/service-account.json", "w"))
PY
