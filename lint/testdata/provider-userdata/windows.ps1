Write-Host "custom user data script started"
Write-Host "custom user data script finished"
