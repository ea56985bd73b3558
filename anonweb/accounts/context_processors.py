from anonweb.accounts.models import Role
from anonweb.accounts.selectors import all_roles


def roles(request):
    user = getattr(request, "user", None)
    mine = all_roles(user=user) if user is not None else set()
    return {
        "my_roles": mine,
        "is_privacy_officer": Role.PRIVACY_OFFICER in mine,
        "is_data_steward": Role.DATA_STEWARD in mine,
        "is_analyst": Role.ANALYST in mine,
    }
