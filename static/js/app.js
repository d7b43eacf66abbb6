// Behaviour shared by every page. Loaded with the CSP nonce; no inline handlers anywhere.
"use strict";
